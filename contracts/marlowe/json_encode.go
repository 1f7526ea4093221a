package marlowe

import (
	"encoding/hex"
	"fmt"
	"math/big"
	"unicode/utf8"
)

// The functions in this file write the Marlowe core JSON format
// (shared/design/MARLOWE.md section 3). Object keys come in alphabetical order,
// as aeson writes them; integers are written exactly; names use the escape of
// names.go; address parties are bech32 for their network.

// jsonWriter appends JSON to a buffer and keeps the first error.
type jsonWriter struct {
	buf []byte
	err error
}

func (w *jsonWriter) raw(s string) { w.buf = append(w.buf, s...) }

func (w *jsonWriter) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

func (w *jsonWriter) int(v *big.Int) {
	if v == nil {
		w.fail(fmt.Errorf("missing integer"))
		w.raw("0")
		return
	}
	w.buf = v.Append(w.buf, 10)
}

func (w *jsonWriter) hex(b []byte) {
	w.buf = append(w.buf, '"')
	w.buf = hex.AppendEncode(w.buf, b)
	w.buf = append(w.buf, '"')
}

func (w *jsonWriter) name(b []byte) { w.buf = appendJSONString(w.buf, NameText(b)) }

const hexDigits = "0123456789abcdef"

// appendJSONString writes a JSON string. s must be valid UTF-8.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		case c < utf8.RuneSelf:
			dst = append(dst, c)
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == '\u2028' || r == '\u2029' {
				dst = append(dst, `\u202`...)
				dst = append(dst, hexDigits[r&0xf])
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
			continue
		}
		i++
	}
	return append(dst, '"')
}

func (w *jsonWriter) party(p Party) {
	if p.Address == nil {
		w.raw(`{"role_token":`)
		w.name(p.Role)
		w.raw("}")
		return
	}
	text, err := p.Address.Bech32()
	if err != nil {
		w.fail(fmt.Errorf("address party: %w", err))
	}
	w.raw(`{"address":`)
	w.buf = appendJSONString(w.buf, text)
	w.raw("}")
}

func (w *jsonWriter) token(t Token) {
	w.raw(`{"currency_symbol":`)
	w.hex(t.Currency)
	w.raw(`,"token_name":`)
	w.name(t.Name)
	w.raw("}")
}

func (w *jsonWriter) payee(p Payee) {
	if p.Kind == PayeeAccount {
		w.raw(`{"account":`)
	} else {
		w.raw(`{"party":`)
	}
	w.party(p.Party)
	w.raw("}")
}

func (w *jsonWriter) choiceID(ch ChoiceID) {
	w.raw(`{"choice_name":`)
	w.name(ch.Name)
	w.raw(`,"choice_owner":`)
	w.party(ch.Owner)
	w.raw("}")
}

func (w *jsonWriter) contract(ct Contract) { contractSum.writeJSON(w, ct) }

func (w *jsonWriter) valueID(v ValueID) { w.name(v.Name) }

// list writes a JSON array of the items.
func list[T any](w *jsonWriter, items []T, item func(*jsonWriter, *T)) {
	w.raw("[")
	for i := range items {
		if i > 0 {
			w.raw(",")
		}
		item(w, &items[i])
	}
	w.raw("]")
}

func (w *jsonWriter) cases(cases []Case) { list(w, cases, (*jsonWriter).caseJSON) }

func (w *jsonWriter) bounds(bounds []Bound) {
	list(w, bounds, func(w *jsonWriter, b *Bound) { w.interval(TimeInterval(*b)) })
}

func (w *jsonWriter) caseJSON(cs *Case) {
	w.raw(`{"case":`)
	w.action(cs.Action)
	if cs.Merkleized() {
		w.raw(`,"merkleized_then":`)
		w.hex(cs.MerkleizedThen)
	} else {
		w.raw(`,"then":`)
		w.contract(cs.Then)
	}
	w.raw("}")
}

func (w *jsonWriter) action(a Action) { actionSum.writeJSON(w, a) }

func (w *jsonWriter) value(v Value) { valueSum.writeJSON(w, v) }

func (w *jsonWriter) observation(o Observation) { observationSum.writeJSON(w, o) }

func (w *jsonWriter) state(st *State) {
	w.raw(`{"accounts":`)
	list(w, st.Accounts, func(w *jsonWriter, e *AccountEntry) { entry(w, (*jsonWriter).accountKey, e, e.Amount) })
	w.raw(`,"boundValues":`)
	list(w, st.BoundValues, func(w *jsonWriter, e *BoundValueEntry) { entry(w, (*jsonWriter).valueID, e.Name, e.Value) })
	w.raw(`,"choices":`)
	list(w, st.Choices, func(w *jsonWriter, e *ChoiceEntry) { entry(w, (*jsonWriter).choiceID, e.Choice, e.Value) })
	w.raw(`,"minTime":`)
	w.int(st.MinTime)
	w.raw("}")
}

// entry writes a state entry [key, value].
func entry[K any](w *jsonWriter, key func(*jsonWriter, K), k K, v *big.Int) {
	w.raw("[")
	key(w, k)
	w.raw(",")
	w.int(v)
	w.raw("]")
}

// accountKey writes the key of an account entry, [party, token].
func (w *jsonWriter) accountKey(e *AccountEntry) {
	w.raw("[")
	w.party(e.Party)
	w.raw(",")
	w.token(e.Token)
	w.raw("]")
}

// input writes an input: its content, and for a merkleized input the
// continuation's keys after the content's in the same object.
func (w *jsonWriter) input(in *Input) {
	if !in.Merkleized() {
		inputContentSum.writeJSON(w, in.Content)
		return
	}
	n := 0
	if _, notify := in.Content.(*INotify); notify {
		w.raw("{")
	} else if n = inputContentSum.writeKeys(w, in.Content); n < 0 {
		return
	}
	if n > 0 {
		w.raw(",")
	}
	w.raw(`"continuation_hash":`)
	w.hex(in.ContinuationHash)
	if in.Continuation != nil {
		w.raw(`,"merkleized_continuation":`)
		w.contract(in.Continuation)
	}
	w.raw("}")
}

func (w *jsonWriter) done() ([]byte, error) {
	if w.err != nil {
		return nil, w.err
	}
	return w.buf, nil
}

func newWriter() *jsonWriter { return &jsonWriter{buf: make([]byte, 0, 512)} }

// writeJSON returns the JSON that write writes of v.
func writeJSON[T any](v T, write func(*jsonWriter, T)) ([]byte, error) {
	w := newWriter()
	write(w, v)
	return w.done()
}

// inputs writes a JSON array of the inputs.
func (w *jsonWriter) inputs(ins []Input) { list(w, ins, (*jsonWriter).input) }

// ContractJSON returns the core JSON of a contract.
func ContractJSON(ct Contract) ([]byte, error) { return writeJSON(ct, (*jsonWriter).contract) }

// ValueJSON returns the core JSON of a value.
func ValueJSON(v Value) ([]byte, error) { return writeJSON(v, (*jsonWriter).value) }

// ObservationJSON returns the core JSON of an observation.
func ObservationJSON(o Observation) ([]byte, error) { return writeJSON(o, (*jsonWriter).observation) }

// MarshalJSON returns the core JSON of a party.
func (p Party) MarshalJSON() ([]byte, error) { return writeJSON(p, (*jsonWriter).party) }

// MarshalJSON returns the core JSON of a token.
func (t Token) MarshalJSON() ([]byte, error) { return writeJSON(t, (*jsonWriter).token) }

// MarshalJSON returns the core JSON of a state.
func (st *State) MarshalJSON() ([]byte, error) { return writeJSON(st, (*jsonWriter).state) }

// MarshalJSON returns the core JSON of an input. A merkleized input has
// "continuation_hash" and, once its continuation is known,
// "merkleized_continuation" beside the content's keys.
func (in *Input) MarshalJSON() ([]byte, error) { return writeJSON(in, (*jsonWriter).input) }

// MarshalJSON returns the JSON array of a redeemer's inputs.
func (r Redeemer) MarshalJSON() ([]byte, error) { return writeJSON([]Input(r), (*jsonWriter).inputs) }

// MarshalJSON returns {"tx_interval":{"from":..,"to":..},"tx_inputs":[..]}.
func (t *TransactionInput) MarshalJSON() ([]byte, error) {
	return writeJSON(t, (*jsonWriter).transactionInput)
}

func (w *jsonWriter) transactionInput(t *TransactionInput) {
	w.raw(`{"tx_inputs":`)
	w.inputs(t.Inputs)
	w.raw(`,"tx_interval":`)
	w.interval(t.Interval)
	w.raw("}")
}

// MarshalJSON returns
// {"marloweParams":{"rolesCurrency":"hex"},"marloweState":State,"marloweContract":Contract}.
func (md *MarloweData) MarshalJSON() ([]byte, error) { return writeJSON(md, (*jsonWriter).marloweData) }

func (w *jsonWriter) marloweData(md *MarloweData) {
	w.raw(`{"marloweParams":{"rolesCurrency":`)
	w.hex(md.Params.RolesCurrency)
	w.raw(`},"marloweState":`)
	w.state(&md.State)
	w.raw(`,"marloweContract":`)
	w.contract(md.Contract)
	w.raw("}")
}

// MarshalJSON returns {"rolesCurrency":"hex","role":"name"}.
func (p *PayoutDatum) MarshalJSON() ([]byte, error) { return writeJSON(p, (*jsonWriter).payoutDatum) }

func (w *jsonWriter) payoutDatum(p *PayoutDatum) {
	w.raw(`{"rolesCurrency":`)
	w.hex(p.RolesCurrency)
	w.raw(`,"role":`)
	w.name(p.Role)
	w.raw("}")
}
