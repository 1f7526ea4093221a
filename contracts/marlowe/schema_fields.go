package marlowe

import (
	"math/big"
	"unsafe"

	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// The readers and writers of a field of each kind, given its address in a
// node: a switch on the kind and a direct call of the kind's codec.

func (f *fieldSpec) fromData(p unsafe.Pointer, d pd.Data) (err error) {
	switch f.tag {
	case kParty:
		*(*Party)(p), err = PartyFromData(d)
	case kPayee:
		*(*Payee)(p), err = payeeFromData(d)
	case kToken:
		*(*Token)(p), err = TokenFromData(d)
	case kChoiceID:
		*(*ChoiceID)(p), err = ChoiceIDFromData(d)
	case kValueID:
		*(*ValueID)(p), err = valueIDFromData(d)
	case kValue:
		*(*Value)(p), err = valueSum.fromData(d)
	case kObservation:
		*(*Observation)(p), err = observationSum.fromData(d)
	case kContract:
		*(*Contract)(p), err = contractSum.fromData(d)
	case kAction:
		*(*Action)(p), err = actionSum.fromData(d)
	case kCases:
		*(*[]Case)(p), err = casesFromData(d)
	case kBounds:
		*(*[]Bound)(p), err = boundsFromData(d)
	case kInt:
		*(**big.Int)(p), err = intOf(d, f.what)
	}
	return err
}

func (f *fieldSpec) toData(p unsafe.Pointer) pd.Data {
	switch f.tag {
	case kParty:
		return (*Party)(p).ToData()
	case kPayee:
		return (*Payee)(p).ToData()
	case kToken:
		return (*Token)(p).ToData()
	case kChoiceID:
		return (*ChoiceID)(p).ToData()
	case kValueID:
		return (*ValueID)(p).ToData()
	case kValue:
		return valueSum.toData(*(*Value)(p))
	case kObservation:
		return observationSum.toData(*(*Observation)(p))
	case kContract:
		return contractSum.toData(*(*Contract)(p))
	case kAction:
		return actionSum.toData(*(*Action)(p))
	case kCases:
		return casesToData(*(*[]Case)(p))
	case kBounds:
		return boundsToData(*(*[]Bound)(p))
	}
	return n(*(**big.Int)(p))
}

func (f *fieldSpec) fromJSON(p unsafe.Pointer, v any) (err error) {
	switch f.tag {
	case kParty:
		*(*Party)(p), err = partyFromJSON(v)
	case kPayee:
		*(*Payee)(p), err = payeeFromJSON(v)
	case kToken:
		*(*Token)(p), err = tokenFromJSON(v)
	case kChoiceID:
		*(*ChoiceID)(p), err = choiceIDFromJSON(v)
	case kValueID:
		*(*ValueID)(p), err = valueIDFromJSON(v)
	case kValue:
		*(*Value)(p), err = valueSum.fromJSON(v)
	case kObservation:
		*(*Observation)(p), err = observationSum.fromJSON(v)
	case kContract:
		*(*Contract)(p), err = contractSum.fromJSON(v)
	case kAction:
		*(*Action)(p), err = actionSum.fromJSON(v)
	case kCases:
		*(*[]Case)(p), err = casesFromJSON(v)
	case kBounds:
		*(*[]Bound)(p), err = boundsFromJSON(v)
	case kInt:
		*(**big.Int)(p), err = jsonInt(v)
	}
	return err
}

func (f *fieldSpec) toJSON(w *jsonWriter, p unsafe.Pointer) {
	switch f.tag {
	case kParty:
		w.party(*(*Party)(p))
	case kPayee:
		w.payee(*(*Payee)(p))
	case kToken:
		w.token(*(*Token)(p))
	case kChoiceID:
		w.choiceID(*(*ChoiceID)(p))
	case kValueID:
		w.valueID(*(*ValueID)(p))
	case kValue:
		valueSum.writeJSON(w, *(*Value)(p))
	case kObservation:
		observationSum.writeJSON(w, *(*Observation)(p))
	case kContract:
		contractSum.writeJSON(w, *(*Contract)(p))
	case kAction:
		actionSum.writeJSON(w, *(*Action)(p))
	case kCases:
		w.cases(*(*[]Case)(p))
	case kBounds:
		w.bounds(*(*[]Bound)(p))
	case kInt:
		w.int(*(**big.Int)(p))
	}
}
