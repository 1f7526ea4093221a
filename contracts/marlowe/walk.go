package marlowe

import "unsafe"

// MapContinuations returns a shallow copy of c with every continuation it
// holds replaced by f of it, in field order: the Then of a Pay, Let or
// Assert; the Then and Else of an If; for a When, the Then of each plain
// case, then the timeout continuation (merkleized cases are copied as they
// are, and the copy's Cases are its own, so the caller may change them).
// Close, nil and any other node come back as they are.
func MapContinuations(c Contract, f func(Contract) Contract) Contract {
	switch x := c.(type) {
	case *Pay:
		y := *x
		y.Then = f(x.Then)
		return &y
	case *If:
		y := *x
		y.Then = f(x.Then)
		y.Else = f(x.Else)
		return &y
	case *Let:
		y := *x
		y.Then = f(x.Then)
		return &y
	case *Assert:
		y := *x
		y.Then = f(x.Then)
		return &y
	case *When:
		y := *x
		y.Cases = make([]Case, len(x.Cases))
		for i, cs := range x.Cases {
			y.Cases[i] = cs
			if !cs.Merkleized() {
				y.Cases[i].Then = f(cs.Then)
			}
		}
		y.TimeoutContinuation = f(x.TimeoutContinuation)
		return &y
	}
	return c
}

// ValueOperands returns the two values a binary node holds: the operands
// of AddValue, SubValue, MulValue and DivValue (a Value) and of the
// comparisons ValueGE, ValueGT, ValueLT, ValueLE and ValueEQ (an
// Observation), the nodes whose fields are two values. ok is false for any
// other node.
func ValueOperands(node any) (left, right Value, ok bool) {
	var fs []fieldSpec
	var p unsafe.Pointer
	switch x := node.(type) {
	case Value:
		fs, p = valueSum.fieldsOf(x)
	case Observation:
		fs, p = observationSum.fieldsOf(x)
	}
	if len(fs) != 2 || fs[0].tag != kValue || fs[1].tag != kValue {
		return nil, nil, false
	}
	return *(*Value)(unsafe.Add(p, fs[0].off)), *(*Value)(unsafe.Add(p, fs[1].off)), true
}
