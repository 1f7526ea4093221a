package record

import "github.com/marlowe-follower/follower/contracts/marlowe"

// PartiesOf collects the parties a contract and state mention, in first-seen
// order: addresses as bech32, roles with the contract's roles currency.
// Addresses that cannot be shown as bech32 are left out (they cannot be
// asked for either).
func PartiesOf(rolesCurrency []byte, c marlowe.Contract, st *marlowe.State) []Party {
	pc := &partyCollector{currency: rolesCurrency, seen: map[string]bool{}}
	if st != nil {
		for _, a := range st.Accounts {
			pc.party(a.Party)
		}
		for _, ch := range st.Choices {
			pc.party(ch.Choice.Owner)
		}
	}
	if c != nil {
		pc.contract(c)
	}
	return pc.out
}

type partyCollector struct {
	currency []byte
	seen     map[string]bool
	out      []Party
}

func (pc *partyCollector) party(p marlowe.Party) {
	if p.Address != nil {
		text, err := p.Address.Bech32()
		if err != nil || pc.seen["a"+text] {
			return
		}
		pc.seen["a"+text] = true
		pc.out = append(pc.out, Party{Address: text})
		return
	}
	if pc.seen["r"+string(p.Role)] {
		return
	}
	pc.seen["r"+string(p.Role)] = true
	pc.out = append(pc.out, Party{RoleCurrency: pc.currency, Role: p.Role})
}

func (pc *partyCollector) contract(c marlowe.Contract) {
	for c != nil {
		switch x := c.(type) {
		case *marlowe.Pay:
			pc.party(x.From)
			pc.party(x.To.Party)
			pc.expr(x.Value)
			c = x.Then
		case *marlowe.If:
			pc.expr(x.Observation)
			pc.contract(x.Then)
			c = x.Else
		case *marlowe.When:
			for i := range x.Cases {
				pc.action(x.Cases[i].Action)
				if x.Cases[i].Then != nil {
					pc.contract(x.Cases[i].Then)
				}
			}
			c = x.TimeoutContinuation
		case *marlowe.Let:
			pc.expr(x.Value)
			c = x.Then
		case *marlowe.Assert:
			pc.expr(x.Observation)
			c = x.Then
		default:
			return
		}
	}
}

func (pc *partyCollector) action(a marlowe.Action) {
	switch x := a.(type) {
	case *marlowe.Deposit:
		pc.party(x.IntoAccount)
		pc.party(x.From)
		pc.expr(x.Amount)
	case *marlowe.Choice:
		pc.party(x.Choice.Owner)
	case *marlowe.Notify:
		pc.expr(x.Observation)
	}
}

// expr collects the parties of a value or an observation.
func (pc *partyCollector) expr(v any) {
	if l, r, ok := marlowe.ValueOperands(v); ok {
		pc.expr(l)
		pc.expr(r)
		return
	}
	switch x := v.(type) {
	case *marlowe.AvailableMoney:
		pc.party(x.Account)
	case *marlowe.NegValue:
		pc.expr(x.Value)
	case *marlowe.ChoiceValue:
		pc.party(x.Choice.Owner)
	case *marlowe.Cond:
		pc.expr(x.Observation)
		pc.expr(x.Then)
		pc.expr(x.Else)
	case *marlowe.AndObs:
		pc.expr(x.Left)
		pc.expr(x.Right)
	case *marlowe.OrObs:
		pc.expr(x.Left)
		pc.expr(x.Right)
	case *marlowe.NotObs:
		pc.expr(x.Observation)
	case *marlowe.ChoseSomething:
		pc.party(x.Choice.Owner)
	}
}
