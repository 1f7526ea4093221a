package devnet

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math/big"

	"github.com/marlowe-follower/follower/contracts/marlowe"
	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// lifecyclesJSON holds 48 contract lifecycles taken from the Marlowe
// reference traces (input-output-hk/marlowe-cardano,
// marlowe-test/reference/data, Apache-2.0): for each of the 24 reference
// contracts its longest trace, a trace with a timeout where there is one, and
// its shortest trace. Each is the initial contract and state and, for every
// transaction, its inputs and interval and the resulting contract, state
// and payments.
//
//go:embed lifecycles.json
var lifecyclesJSON []byte

// Lifecycle is a contract's life as a sequence of transactions.
type Lifecycle struct {
	Name     string
	Contract marlowe.Contract
	State    marlowe.State
	Steps    []LifecycleStep
	// windows[i] is when step i may be put on chain, for a lifecycle
	// scheduled on a network's clock (scheduleLifecycle); nil otherwise.
	windows []stepWindow
}

// LifecycleStep is one transaction of a lifecycle and what it results in.
type LifecycleStep struct {
	Input    marlowe.TransactionInput
	Contract marlowe.Contract // after the transaction; *marlowe.Close when it closed
	State    marlowe.State
	Payments []Payment
}

// Payment is a payment made by a step: to a party (an output) or to an
// internal account (no output).
type Payment struct {
	From   marlowe.Party
	To     marlowe.Payee
	Token  marlowe.Token
	Amount *big.Int
}

type rawLifecycle struct {
	Name         string          `json:"name"`
	Contract     json.RawMessage `json:"contract"`
	State        json.RawMessage `json:"state"`
	Transactions []struct {
		Input  json.RawMessage `json:"input"`
		Output struct {
			Contract json.RawMessage `json:"contract"`
			State    json.RawMessage `json:"state"`
			Payments []struct {
				Amount      json.Number     `json:"amount"`
				PaymentFrom marlowe.Party   `json:"payment_from"`
				To          json.RawMessage `json:"to"`
				Token       marlowe.Token   `json:"token"`
			} `json:"payments"`
		} `json:"output"`
	} `json:"transactions"`
}

// Lifecycles returns the built-in contract lifecycles with their address
// parties on the given network: the reference traces' (lifecyclesJSON),
// then the devnet's own (ownLifecycles). The traces' parties are of either
// network (addr1 and addr_test); a chain's contracts pay its own network's
// addresses, so each is moved to the chain's network (the same credentials;
// no two parties of a lifecycle become one: TestLifecyclesOnNetwork).
func Lifecycles(network marlowe.Network) ([]Lifecycle, error) {
	text, err := addressesOn(lifecyclesJSON, network)
	if err != nil {
		return nil, fmt.Errorf("built-in lifecycles: %w", err)
	}
	var raws []rawLifecycle
	if err := json.Unmarshal(text, &raws); err != nil {
		return nil, fmt.Errorf("built-in lifecycles: %w", err)
	}
	out := make([]Lifecycle, 0, len(raws))
	for i, r := range raws {
		lc, err := parseLifecycle(r)
		if err != nil {
			return nil, fmt.Errorf("built-in lifecycle %d (%s): %w", i, r.Name, err)
		}
		out = append(out, lc)
	}
	own, err := ownLifecycles(network)
	if err != nil {
		return nil, err
	}
	return append(out, own...), nil
}

func parseLifecycle(r rawLifecycle) (Lifecycle, error) {
	lc := Lifecycle{Name: r.Name}
	var err error
	if lc.Contract, err = marlowe.ParseContractJSON(r.Contract); err != nil {
		return lc, err
	}
	st, err := marlowe.ParseStateJSON(r.State)
	if err != nil {
		return lc, err
	}
	lc.State = *st
	for j, t := range r.Transactions {
		var s LifecycleStep
		in, err := marlowe.ParseTransactionInputJSON(t.Input)
		if err != nil {
			return lc, fmt.Errorf("transaction %d: %w", j, err)
		}
		s.Input = *in
		if s.Contract, err = marlowe.ParseContractJSON(t.Output.Contract); err != nil {
			return lc, fmt.Errorf("transaction %d: %w", j, err)
		}
		ost, err := marlowe.ParseStateJSON(t.Output.State)
		if err != nil {
			return lc, fmt.Errorf("transaction %d: %w", j, err)
		}
		s.State = *ost
		for _, p := range t.Output.Payments {
			amount, ok := new(big.Int).SetString(string(p.Amount), 10)
			if !ok {
				return lc, fmt.Errorf("transaction %d: payment amount %q", j, p.Amount)
			}
			payee, err := parsePayee(p.To)
			if err != nil {
				return lc, fmt.Errorf("transaction %d: %w", j, err)
			}
			s.Payments = append(s.Payments, Payment{From: p.PaymentFrom, To: payee, Token: p.Token, Amount: amount})
		}
		lc.Steps = append(lc.Steps, s)
	}
	return lc, nil
}

// addressesOn rewrites the address parties ({"address": BECH32}) of
// Marlowe JSON to the network.
func addressesOn(text []byte, network marlowe.Network) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber() // amounts and times beyond float64
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var walk func(v any) error
	walk = func(v any) error {
		switch x := v.(type) {
		case map[string]any:
			if a, ok := x["address"].(string); ok && len(x) == 1 {
				pa, err := marlowe.ParsePartyAddress(a)
				if err != nil {
					return err
				}
				pa.Network = network
				if x["address"], err = pa.Bech32(); err != nil {
					return err
				}
				return nil
			}
			for _, e := range x {
				if err := walk(e); err != nil {
					return err
				}
			}
		case []any:
			for _, e := range x {
				if err := walk(e); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// parsePayee reads {"party":P} or {"account":P}.
func parsePayee(raw json.RawMessage) (marlowe.Payee, error) {
	var m map[string]marlowe.Party
	if err := json.Unmarshal(raw, &m); err != nil || len(m) != 1 {
		return marlowe.Payee{}, fmt.Errorf("payee %s: %v", raw, err)
	}
	if p, ok := m["party"]; ok {
		return marlowe.Payee{Kind: marlowe.PayeeParty, Party: p}, nil
	}
	if p, ok := m["account"]; ok {
		return marlowe.Payee{Kind: marlowe.PayeeAccount, Party: p}, nil
	}
	return marlowe.Payee{}, fmt.Errorf("payee %s", raw)
}

// merkleizeDeep merkleizes a contract as the Marlowe Runtime's builders
// do: the continuation of every case of every When (except Close) is
// replaced by its hash, bottom up, so each continuation is merkleized
// itself. It returns the merkleized contract and the continuations by
// hash. Reducing a merkleized contract gives the merkleized form of the
// plain contract's reduction, so the datum a step leaves is exactly what
// the validator computes from the continuation it is given.
func merkleizeDeep(c marlowe.Contract) (marlowe.Contract, map[[32]byte]marlowe.Contract) {
	conts := map[[32]byte]marlowe.Contract{}
	var m func(c marlowe.Contract) marlowe.Contract
	m = func(c marlowe.Contract) marlowe.Contract {
		y := marlowe.MapContinuations(c, m)
		w, ok := y.(*marlowe.When)
		if !ok {
			return y
		}
		for i, cs := range w.Cases {
			if _, isClose := cs.Then.(*marlowe.Close); isClose || cs.Merkleized() {
				continue
			}
			h := marlowe.ContinuationHash(cs.Then)
			conts[h] = cs.Then
			w.Cases[i] = marlowe.Case{Action: cs.Action, MerkleizedThen: h[:]}
		}
		return w
	}
	return m(c), conts
}

// singleInputs reports whether every step of a lifecycle applies at most
// one input: a step of several inputs into a merkleized contract needs a
// continuation for each, which the generator does not make, so such
// lifecycles are not merkleized.
func singleInputs(lc *Lifecycle) bool {
	for i := range lc.Steps {
		if len(lc.Steps[i].Input.Inputs) > 1 {
			return false
		}
	}
	return true
}

// shapeMatch reports whether an input could be taken by an action: same
// parties and token for a deposit, same choice with the number in bounds
// for a choice, any notify for a notify. It does not evaluate values or
// observations, so it is used only where exactly one case matches.
func shapeMatch(a marlowe.Action, in marlowe.InputContent) bool {
	switch x := a.(type) {
	case *marlowe.Deposit:
		d, ok := in.(*marlowe.IDeposit)
		return ok && partyKey(x.IntoAccount) == partyKey(d.IntoAccount) && partyKey(x.From) == partyKey(d.From) &&
			tokenKey(x.Token) == tokenKey(d.Token)
	case *marlowe.Choice:
		ch, ok := in.(*marlowe.IChoice)
		if !ok || string(x.Choice.Name) != string(ch.Choice.Name) || partyKey(x.Choice.Owner) != partyKey(ch.Choice.Owner) {
			return false
		}
		for _, b := range x.Bounds {
			if ch.ChosenNum.Cmp(b.From) >= 0 && ch.ChosenNum.Cmp(b.To) <= 0 {
				return true
			}
		}
		return false
	case *marlowe.Notify:
		_, ok := in.(*marlowe.INotify)
		return ok
	}
	return false
}

func partyKey(p marlowe.Party) string { return string(pd.Encode(p.ToData())) }
func tokenKey(t marlowe.Token) string { return string(pd.Encode(t.ToData())) }
