package marlowe

import (
	"errors"
	"fmt"
	"math/big"
)

// The core JSON of the semantics' results, as the ToJSON instances of
// marlowe-cardano's Semantics.hs write it (keys in alphabetical order, as
// aeson does). The readers follow the package's rule that an object must
// have exactly the keys of one constructor.

func (w *jsonWriter) payment(p *Payment) {
	w.raw(`{"amount":`)
	w.int(p.Amount)
	w.raw(`,"payment_from":`)
	w.party(p.From)
	w.raw(`,"to":`)
	w.payee(p.To)
	w.raw(`,"token":`)
	w.token(p.Token)
	w.raw("}")
}

func (w *jsonWriter) warning(tw TransactionWarning) { warningSum.writeJSON(w, tw) }

func (w *jsonWriter) interval(iv TimeInterval) {
	w.raw(`{"from":`)
	w.int(iv.From)
	w.raw(`,"to":`)
	w.int(iv.To)
	w.raw("}")
}

func (w *jsonWriter) intervalError(ie *IntervalError) {
	switch ie.Kind {
	case InvalidInterval:
		w.raw(`{"invalidInterval":`)
		w.interval(ie.Interval)
		w.raw("}")
	case IntervalInPastError:
		w.raw(`{"intervalInPastError":{"from":`)
		w.int(ie.Interval.From)
		w.raw(`,"minTime":`)
		w.int(ie.MinTime)
		w.raw(`,"to":`)
		w.int(ie.Interval.To)
		w.raw("}}")
	default:
		w.fail(fmt.Errorf("interval error kind %d", ie.Kind))
		w.raw("null")
	}
}

func (w *jsonWriter) transactionError(te *TransactionError) {
	switch te.Kind {
	case TEIntervalError:
		if te.IntervalError == nil {
			w.fail(fmt.Errorf("TEIntervalError without its interval error"))
			w.raw("null")
			return
		}
		w.raw(`{"context":`)
		w.intervalError(te.IntervalError)
		w.raw(`,"error":"TEIntervalError"}`)
	case TEAmbiguousTimeIntervalError, TEApplyNoMatchError, TEUselessTransaction, TEHashMismatch:
		w.raw(`"`)
		w.raw(te.Kind.String())
		w.raw(`"`)
	default:
		w.fail(fmt.Errorf("transaction error kind %d", te.Kind))
		w.raw("null")
	}
}

func (w *jsonWriter) output(o *TransactionOutput) {
	w.raw(`{"contract":`)
	w.contract(o.Contract)
	w.raw(`,"payments":`)
	list(w, o.Payments, (*jsonWriter).payment)
	w.raw(`,"state":`)
	w.state(&o.State)
	w.raw(`,"warnings":`)
	list(w, o.Warnings, func(w *jsonWriter, tw *TransactionWarning) { w.warning(*tw) })
	w.raw("}")
}

// MarshalJSON returns {"amount":n,"payment_from":Party,"to":Payee,"token":Token}.
func (p Payment) MarshalJSON() ([]byte, error) { return writeJSON(&p, (*jsonWriter).payment) }

// TransactionWarningJSON returns the core JSON of a warning; each warning
// type's MarshalJSON returns the same.
func TransactionWarningJSON(tw TransactionWarning) ([]byte, error) {
	return writeJSON(tw, (*jsonWriter).warning)
}

// MarshalJSON returns
// {"asked_to_deposit":n,"in_account":Party,"of_token":Token,"party":Party}.
func (x *TransactionNonPositiveDeposit) MarshalJSON() ([]byte, error) {
	return TransactionWarningJSON(x)
}

// MarshalJSON returns
// {"account":Party,"asked_to_pay":n,"of_token":Token,"to_payee":Payee}.
func (x *TransactionNonPositivePay) MarshalJSON() ([]byte, error) {
	return TransactionWarningJSON(x)
}

// MarshalJSON returns {"account":Party,"asked_to_pay":expected,
// "but_only_paid":paid,"of_token":Token,"to_payee":Payee}.
func (x *TransactionPartialPay) MarshalJSON() ([]byte, error) {
	return TransactionWarningJSON(x)
}

// MarshalJSON returns {"had_value":old,"is_now_assigned":new,"value_id":"name"}.
func (x *TransactionShadowing) MarshalJSON() ([]byte, error) {
	return TransactionWarningJSON(x)
}

// MarshalJSON returns "assertion_failed".
func (x *TransactionAssertionFailed) MarshalJSON() ([]byte, error) {
	return TransactionWarningJSON(x)
}

// MarshalJSON returns {"invalidInterval":{"from":a,"to":b}} or
// {"intervalInPastError":{"from":a,"minTime":m,"to":b}}.
func (e *IntervalError) MarshalJSON() ([]byte, error) {
	return writeJSON(e, (*jsonWriter).intervalError)
}

// MarshalJSON returns the name of the error kind as a JSON string, or
// {"context":IntervalError,"error":"TEIntervalError"}. Input and Detail are
// not part of the JSON.
func (e *TransactionError) MarshalJSON() ([]byte, error) {
	return writeJSON(e, (*jsonWriter).transactionError)
}

// MarshalJSON returns
// {"contract":Contract,"payments":[..],"state":State,"warnings":[..]}.
func (o TransactionOutput) MarshalJSON() ([]byte, error) { return writeJSON(&o, (*jsonWriter).output) }

// TransactionResultJSON returns the JSON of the reference's TransactionOutput
// for a result of ComputeTransaction: the output when err is nil, or
// {"transaction_error":TransactionError} when err is a *TransactionError.
// Any other error is returned as it is.
func TransactionResultJSON(out *TransactionOutput, err error) ([]byte, error) {
	if err != nil {
		var te *TransactionError
		if !errors.As(err, &te) {
			return nil, err
		}
		w := newWriter()
		w.raw(`{"transaction_error":`)
		w.transactionError(te)
		w.raw("}")
		return w.done()
	}
	if out == nil {
		return nil, fmt.Errorf("marlowe: no transaction output")
	}
	return out.MarshalJSON()
}

func paymentFromJSON(v any) (Payment, error) {
	r := recordOf(v, "Payment", "amount,payment_from,to,token")
	return built(&r.fields, Payment{
		Amount: recordField(&r, "amount", jsonInt),
		From:   recordField(&r, "payment_from", partyFromJSON),
		To:     recordField(&r, "to", payeeFromJSON),
		Token:  recordField(&r, "token", tokenFromJSON),
	})
}

func warningFromJSON(v any) (TransactionWarning, error) { return warningSum.fromJSON(v) }

// intervalFromJSON reads {"from":a,"to":b}, plus "minTime" when withMinTime;
// what names it in errors.
func intervalFromJSON(v any, what string, withMinTime bool) (iv TimeInterval, minTime *big.Int, err error) {
	want := "from,to"
	if withMinTime {
		want = "from,minTime,to"
	}
	m, err := record(v, what, want)
	if err != nil {
		return iv, nil, err
	}
	if iv.From, err = jsonInt(m["from"]); err != nil {
		return iv, nil, at("from", err)
	}
	if iv.To, err = jsonInt(m["to"]); err != nil {
		return iv, nil, at("to", err)
	}
	if withMinTime {
		if minTime, err = jsonInt(m["minTime"]); err != nil {
			return iv, nil, at("minTime", err)
		}
	}
	return iv, minTime, nil
}

func intervalErrorFromJSON(v any) (*IntervalError, error) {
	m, sig, err := object(v, "IntervalError")
	if err != nil {
		return nil, err
	}
	switch sig {
	case "invalidInterval":
		iv, _, err := intervalFromJSON(m[sig], "interval", false)
		if err != nil {
			return nil, at(sig, err)
		}
		return &IntervalError{Kind: InvalidInterval, Interval: iv}, nil
	case "intervalInPastError":
		iv, minTime, err := intervalFromJSON(m[sig], "interval", true)
		if err != nil {
			return nil, at(sig, err)
		}
		return &IntervalError{Kind: IntervalInPastError, MinTime: minTime, Interval: iv}, nil
	}
	return nil, unknownKeys("IntervalError", sig)
}

func transactionErrorFromJSON(v any) (*TransactionError, error) {
	if s, ok := v.(string); ok {
		for _, k := range []TransactionErrorKind{TEAmbiguousTimeIntervalError, TEApplyNoMatchError, TEUselessTransaction, TEHashMismatch} {
			if s == k.String() {
				return &TransactionError{Kind: k, Input: -1}, nil
			}
		}
		return nil, shapeError("TransactionError: unknown error %q", s)
	}
	m, sig, err := object(v, "TransactionError")
	if err != nil {
		return nil, err
	}
	if sig != "context,error" {
		return nil, unknownKeys("TransactionError", sig)
	}
	name, err := jsonString(m["error"])
	if err != nil {
		return nil, at("error", err)
	}
	if name != "TEIntervalError" {
		return nil, at("error", shapeError("TransactionError: unknown error %q with a context", name))
	}
	ie, err := intervalErrorFromJSON(m["context"])
	if err != nil {
		return nil, at("context", err)
	}
	return &TransactionError{Kind: TEIntervalError, IntervalError: ie, Input: -1}, nil
}

// transactionResult is what the reference's TransactionOutput JSON holds:
// an output or an error.
type transactionResult struct {
	out *TransactionOutput
	err *TransactionError
}

func transactionResultFromJSON(v any) (transactionResult, error) {
	m, sig, err := object(v, "TransactionOutput")
	if err != nil {
		return transactionResult{}, err
	}
	switch sig {
	case "transaction_error":
		te, err := transactionErrorFromJSON(m[sig])
		if err != nil {
			return transactionResult{}, at(sig, err)
		}
		return transactionResult{err: te}, nil
	case "contract,payments,state,warnings":
	default:
		return transactionResult{}, unknownKeys("TransactionOutput", sig)
	}
	o := &TransactionOutput{}
	if o.Contract, err = contractFromJSON(m["contract"]); err != nil {
		return transactionResult{}, at("contract", err)
	}
	payments, err := jsonArray(m["payments"])
	if err != nil {
		return transactionResult{}, at("payments", err)
	}
	if o.Payments, err = eachOf(payments, paymentFromJSON); err != nil {
		return transactionResult{}, at("payments", err)
	}
	st, err := stateFromJSON(m["state"])
	if err != nil {
		return transactionResult{}, at("state", err)
	}
	o.State = *st
	warnings, err := jsonArray(m["warnings"])
	if err != nil {
		return transactionResult{}, at("warnings", err)
	}
	if o.Warnings, err = eachOf(warnings, warningFromJSON); err != nil {
		return transactionResult{}, at("warnings", err)
	}
	return transactionResult{out: o}, nil
}

// ParsePaymentJSON reads a payment from core JSON.
func ParsePaymentJSON(text []byte) (Payment, error) { return parse(text, paymentFromJSON) }

// ParseTransactionWarningJSON reads a transaction warning from core JSON.
func ParseTransactionWarningJSON(text []byte) (TransactionWarning, error) {
	return parse(text, warningFromJSON)
}

// ParseIntervalErrorJSON reads an interval error from core JSON.
func ParseIntervalErrorJSON(text []byte) (*IntervalError, error) {
	return parse(text, intervalErrorFromJSON)
}

// ParseTransactionErrorJSON reads a transaction error from core JSON. Its
// Input is -1 and its Detail empty, as the JSON does not hold them.
func ParseTransactionErrorJSON(text []byte) (*TransactionError, error) {
	return parse(text, transactionErrorFromJSON)
}

// ParseTransactionOutputJSON reads the reference's TransactionOutput JSON:
// either an output, returned in out, or {"transaction_error":..}, returned
// in txErr. Exactly one of them is set when err is nil.
func ParseTransactionOutputJSON(text []byte) (out *TransactionOutput, txErr *TransactionError, err error) {
	r, err := parse(text, transactionResultFromJSON)
	if err != nil {
		return nil, nil, err
	}
	return r.out, r.err, nil
}
