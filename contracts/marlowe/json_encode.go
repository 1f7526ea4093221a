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

func (w *jsonWriter) contract(ct Contract) {
	switch x := ct.(type) {
	case *Close:
		w.raw(`"close"`)
	case *Pay:
		w.raw(`{"from_account":`)
		w.party(x.From)
		w.raw(`,"pay":`)
		w.value(x.Value)
		w.raw(`,"then":`)
		w.contract(x.Then)
		w.raw(`,"to":`)
		w.payee(x.To)
		w.raw(`,"token":`)
		w.token(x.Token)
		w.raw("}")
	case *If:
		w.raw(`{"else":`)
		w.contract(x.Else)
		w.raw(`,"if":`)
		w.observation(x.Observation)
		w.raw(`,"then":`)
		w.contract(x.Then)
		w.raw("}")
	case *When:
		w.raw(`{"timeout":`)
		w.int(x.Timeout)
		w.raw(`,"timeout_continuation":`)
		w.contract(x.TimeoutContinuation)
		w.raw(`,"when":[`)
		for i := range x.Cases {
			if i > 0 {
				w.raw(",")
			}
			w.caseJSON(&x.Cases[i])
		}
		w.raw("]}")
	case *Let:
		w.raw(`{"be":`)
		w.value(x.Value)
		w.raw(`,"let":`)
		w.name(x.Name.Name)
		w.raw(`,"then":`)
		w.contract(x.Then)
		w.raw("}")
	case *Assert:
		w.raw(`{"assert":`)
		w.observation(x.Observation)
		w.raw(`,"then":`)
		w.contract(x.Then)
		w.raw("}")
	default:
		w.fail(fmt.Errorf("contract node %T", ct))
		w.raw("null")
	}
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

func (w *jsonWriter) action(a Action) {
	switch x := a.(type) {
	case *Deposit:
		w.raw(`{"deposits":`)
		w.value(x.Amount)
		w.raw(`,"into_account":`)
		w.party(x.IntoAccount)
		w.raw(`,"of_token":`)
		w.token(x.Token)
		w.raw(`,"party":`)
		w.party(x.From)
		w.raw("}")
	case *Choice:
		w.raw(`{"choose_between":[`)
		for i, bd := range x.Bounds {
			if i > 0 {
				w.raw(",")
			}
			w.raw(`{"from":`)
			w.int(bd.From)
			w.raw(`,"to":`)
			w.int(bd.To)
			w.raw("}")
		}
		w.raw(`],"for_choice":`)
		w.choiceID(x.Choice)
		w.raw("}")
	case *Notify:
		w.raw(`{"notify_if":`)
		w.observation(x.Observation)
		w.raw("}")
	default:
		w.fail(fmt.Errorf("action %T", a))
		w.raw("null")
	}
}

func (w *jsonWriter) pair(k1 string, v1 Value, k2 string, v2 Value) {
	w.raw(`{"`)
	w.raw(k1)
	w.raw(`":`)
	w.value(v1)
	w.raw(`,"`)
	w.raw(k2)
	w.raw(`":`)
	w.value(v2)
	w.raw("}")
}

func (w *jsonWriter) value(v Value) {
	switch x := v.(type) {
	case *AvailableMoney:
		w.raw(`{"amount_of_token":`)
		w.token(x.Token)
		w.raw(`,"in_account":`)
		w.party(x.Account)
		w.raw("}")
	case *Constant:
		w.int(x.N)
	case *NegValue:
		w.raw(`{"negate":`)
		w.value(x.Value)
		w.raw("}")
	case *AddValue:
		w.pair("add", x.Left, "and", x.Right)
	case *SubValue:
		w.raw(`{"minus":`)
		w.value(x.Right)
		w.raw(`,"value":`)
		w.value(x.Left)
		w.raw("}")
	case *MulValue:
		w.pair("multiply", x.Left, "times", x.Right)
	case *DivValue:
		w.raw(`{"by":`)
		w.value(x.Right)
		w.raw(`,"divide":`)
		w.value(x.Left)
		w.raw("}")
	case *ChoiceValue:
		w.raw(`{"value_of_choice":`)
		w.choiceID(x.Choice)
		w.raw("}")
	case *TimeIntervalStart:
		w.raw(`"time_interval_start"`)
	case *TimeIntervalEnd:
		w.raw(`"time_interval_end"`)
	case *UseValue:
		w.raw(`{"use_value":`)
		w.name(x.Name.Name)
		w.raw("}")
	case *Cond:
		w.raw(`{"else":`)
		w.value(x.Else)
		w.raw(`,"if":`)
		w.observation(x.Observation)
		w.raw(`,"then":`)
		w.value(x.Then)
		w.raw("}")
	default:
		w.fail(fmt.Errorf("value %T", v))
		w.raw("null")
	}
}

func (w *jsonWriter) comparison(key string, l, r Value) {
	w.raw(`{"`)
	w.raw(key)
	w.raw(`":`)
	w.value(r)
	w.raw(`,"value":`)
	w.value(l)
	w.raw("}")
}

func (w *jsonWriter) observation(o Observation) {
	switch x := o.(type) {
	case *AndObs:
		w.raw(`{"and":`)
		w.observation(x.Right)
		w.raw(`,"both":`)
		w.observation(x.Left)
		w.raw("}")
	case *OrObs:
		w.raw(`{"either":`)
		w.observation(x.Left)
		w.raw(`,"or":`)
		w.observation(x.Right)
		w.raw("}")
	case *NotObs:
		w.raw(`{"not":`)
		w.observation(x.Observation)
		w.raw("}")
	case *ChoseSomething:
		w.raw(`{"chose_something_for":`)
		w.choiceID(x.Choice)
		w.raw("}")
	case *ValueGE:
		w.comparison("ge_than", x.Left, x.Right)
	case *ValueGT:
		w.comparison("gt", x.Left, x.Right)
	case *ValueLT:
		w.comparison("lt", x.Left, x.Right)
	case *ValueLE:
		w.comparison("le_than", x.Left, x.Right)
	case *ValueEQ:
		w.comparison("equal_to", x.Left, x.Right)
	case *TrueObs:
		w.raw("true")
	case *FalseObs:
		w.raw("false")
	default:
		w.fail(fmt.Errorf("observation %T", o))
		w.raw("null")
	}
}

func (w *jsonWriter) state(st *State) {
	w.raw(`{"accounts":[`)
	for i, e := range st.Accounts {
		if i > 0 {
			w.raw(",")
		}
		w.raw("[[")
		w.party(e.Party)
		w.raw(",")
		w.token(e.Token)
		w.raw("],")
		w.int(e.Amount)
		w.raw("]")
	}
	w.raw(`],"boundValues":[`)
	for i, e := range st.BoundValues {
		if i > 0 {
			w.raw(",")
		}
		w.raw("[")
		w.name(e.Name.Name)
		w.raw(",")
		w.int(e.Value)
		w.raw("]")
	}
	w.raw(`],"choices":[`)
	for i, e := range st.Choices {
		if i > 0 {
			w.raw(",")
		}
		w.raw("[")
		w.choiceID(e.Choice)
		w.raw(",")
		w.int(e.Value)
		w.raw("]")
	}
	w.raw(`],"minTime":`)
	w.int(st.MinTime)
	w.raw("}")
}

func (w *jsonWriter) input(in *Input) {
	merk := in.Merkleized()
	switch x := in.Content.(type) {
	case *IDeposit:
		w.raw(`{"input_from_party":`)
		w.party(x.From)
		w.raw(`,"into_account":`)
		w.party(x.IntoAccount)
		w.raw(`,"of_token":`)
		w.token(x.Token)
		w.raw(`,"that_deposits":`)
		w.int(x.Amount)
	case *IChoice:
		w.raw(`{"for_choice_id":`)
		w.choiceID(x.Choice)
		w.raw(`,"input_that_chooses_num":`)
		w.int(x.ChosenNum)
	case *INotify:
		if !merk {
			w.raw(`"input_notify"`)
			return
		}
		w.raw("{")
	default:
		w.fail(fmt.Errorf("input content %T", in.Content))
		w.raw("null")
		return
	}
	if merk {
		if _, notify := in.Content.(*INotify); !notify {
			w.raw(",")
		}
		w.raw(`"continuation_hash":`)
		w.hex(in.ContinuationHash)
		if in.Continuation != nil {
			w.raw(`,"merkleized_continuation":`)
			w.contract(in.Continuation)
		}
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

// inputs writes the inputs, separated by commas.
func (w *jsonWriter) inputs(ins []Input) {
	for i := range ins {
		if i > 0 {
			w.raw(",")
		}
		w.input(&ins[i])
	}
}

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
func (r Redeemer) MarshalJSON() ([]byte, error) {
	w := newWriter()
	w.raw("[")
	w.inputs(r)
	w.raw("]")
	return w.done()
}

// MarshalJSON returns {"tx_interval":{"from":..,"to":..},"tx_inputs":[..]}.
func (t *TransactionInput) MarshalJSON() ([]byte, error) {
	w := newWriter()
	w.raw(`{"tx_inputs":[`)
	w.inputs(t.Inputs)
	w.raw(`],"tx_interval":{"from":`)
	w.int(t.Interval.From)
	w.raw(`,"to":`)
	w.int(t.Interval.To)
	w.raw("}}")
	return w.done()
}

// MarshalJSON returns
// {"marloweParams":{"rolesCurrency":"hex"},"marloweState":State,"marloweContract":Contract}.
func (md *MarloweData) MarshalJSON() ([]byte, error) {
	w := newWriter()
	w.raw(`{"marloweParams":{"rolesCurrency":`)
	w.hex(md.Params.RolesCurrency)
	w.raw(`},"marloweState":`)
	w.state(&md.State)
	w.raw(`,"marloweContract":`)
	w.contract(md.Contract)
	w.raw("}")
	return w.done()
}

// MarshalJSON returns {"rolesCurrency":"hex","role":"name"}.
func (p *PayoutDatum) MarshalJSON() ([]byte, error) {
	w := newWriter()
	w.raw(`{"rolesCurrency":`)
	w.hex(p.RolesCurrency)
	w.raw(`,"role":`)
	w.name(p.Role)
	w.raw("}")
	return w.done()
}
