package streamtest

// LeadingDigits parses the decimal digits at the start of b (0 when there
// are none): a number read straight out of a frame's JSON, for the
// clients that look at frames without decoding them.
func LeadingDigits(b []byte) int64 {
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	return n
}
