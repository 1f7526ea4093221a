package marlowe

import "strconv"

// The JSON of Next, as the ToJSON instances of marlowe-cardano's
// Language.Marlowe.Core.V1.Next modules write it and the runtime's OpenAPI
// schema "Next" describes it, with keys in alphabetical order as aeson
// writes them. Parties, tokens and choice ids are core JSON. An absent
// notification is left out (not null); the continuation hash of a
// merkleized case is not part of the JSON.

func (w *jsonWriter) caseIndex(ac ApplicableCase) {
	w.raw(`"case_index":`)
	w.buf = strconv.AppendInt(w.buf, int64(ac.CaseIndex), 10)
}

func (w *jsonWriter) isMerkleized(ac ApplicableCase) {
	w.raw(`"is_merkleized_continuation":`)
	w.buf = strconv.AppendBool(w.buf, ac.Merkleized)
}

func (w *jsonWriter) canNotify(n *CanNotify) {
	w.raw("{")
	w.caseIndex(n.ApplicableCase)
	w.raw(",")
	w.isMerkleized(n.ApplicableCase)
	w.raw("}")
}

func (w *jsonWriter) canDeposit(d *CanDeposit) {
	w.raw(`{"can_deposit":`)
	w.int(d.Amount)
	w.raw(",")
	w.caseIndex(d.ApplicableCase)
	w.raw(`,"into_account":`)
	w.party(d.IntoAccount)
	w.raw(",")
	w.isMerkleized(d.ApplicableCase)
	w.raw(`,"of_token":`)
	w.token(d.Token)
	w.raw(`,"party":`)
	w.party(d.From)
	w.raw("}")
}

func (w *jsonWriter) canChoose(c *CanChoose) {
	w.raw(`{"can_choose_between":`)
	w.bounds(c.Bounds)
	w.raw(",")
	w.caseIndex(c.ApplicableCase)
	w.raw(`,"for_choice":`)
	w.choiceID(c.Choice)
	w.raw(",")
	w.isMerkleized(c.ApplicableCase)
	w.raw("}")
}

func (w *jsonWriter) applicableInputs(a *ApplicableInputs) {
	w.raw(`{"choices":`)
	list(w, a.Choices, (*jsonWriter).canChoose)
	w.raw(`,"deposits":`)
	list(w, a.Deposits, (*jsonWriter).canDeposit)
	if a.Notify != nil {
		w.raw(`,"notify":`)
		w.canNotify(a.Notify)
	}
	w.raw("}")
}

// MarshalJSON returns {"applicable_inputs":ApplicableInputs,"can_reduce":bool}.
func (n Next) MarshalJSON() ([]byte, error) { return writeJSON(&n, (*jsonWriter).next) }

func (w *jsonWriter) next(n *Next) {
	w.raw(`{"applicable_inputs":`)
	w.applicableInputs(&n.ApplicableInputs)
	w.raw(`,"can_reduce":`)
	w.buf = strconv.AppendBool(w.buf, n.CanReduce)
	w.raw("}")
}

// MarshalJSON returns {"choices":[CanChoose..],"deposits":[CanDeposit..]},
// with "notify":CanNotify too when a notification applies.
func (a ApplicableInputs) MarshalJSON() ([]byte, error) {
	return writeJSON(&a, (*jsonWriter).applicableInputs)
}

// MarshalJSON returns {"case_index":n,"is_merkleized_continuation":bool}.
func (n CanNotify) MarshalJSON() ([]byte, error) { return writeJSON(&n, (*jsonWriter).canNotify) }

// MarshalJSON returns {"can_deposit":n,"case_index":n,"into_account":Party,
// "is_merkleized_continuation":bool,"of_token":Token,"party":Party}.
func (d CanDeposit) MarshalJSON() ([]byte, error) { return writeJSON(&d, (*jsonWriter).canDeposit) }

// MarshalJSON returns {"can_choose_between":[{"from":n,"to":n}..],
// "case_index":n,"for_choice":ChoiceId,"is_merkleized_continuation":bool}.
func (c CanChoose) MarshalJSON() ([]byte, error) { return writeJSON(&c, (*jsonWriter).canChoose) }
