package apitest

// WalkJSON calls fn on every object of a decoded JSON document, each
// before the objects inside it.
func WalkJSON(v any, fn func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		fn(x)
		for _, e := range x {
			WalkJSON(e, fn)
		}
	case []any:
		for _, e := range x {
			WalkJSON(e, fn)
		}
	}
}
