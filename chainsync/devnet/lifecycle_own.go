package devnet

import (
	"fmt"
	"math/big"

	"github.com/marlowe-follower/follower/contracts/marlowe"
)

// ownLifecycles are the devnet's own lifecycles, beside the reference
// traces: made here for what those traces lack, and played like them.
//
// merged-payments pays one address party several times in one step (100
// and 400 ada and two token payments to the seller), beside a role payout
// (the broker's 5 ada) and Close's refund to another address (the buyer's
// minimum ada). A real chain pays each address payee its payments in one
// output or a few (wallets and the Runtime's builder merge them; the
// validator checks totals per payee), and so does the generator
// (blockBuild.payParties): the follower must attribute every payment to
// the output that carries it. The reference traces never pay an address
// twice in a step.
func ownLifecycles(network marlowe.Network) ([]Lifecycle, error) {
	lc, err := mergedPaymentsLifecycle(network)
	if err != nil {
		return nil, fmt.Errorf("built-in lifecycle merged-payments: %w", err)
	}
	return []Lifecycle{lc}, nil
}

// ownAddress is a key address of the network whose key hash is b repeated.
func ownAddress(network marlowe.Network, b byte) *marlowe.PartyAddress {
	h := make([]byte, 28)
	for i := range h {
		h[i] = b
	}
	return &marlowe.PartyAddress{Network: network, Address: marlowe.Address{Payment: marlowe.Credential{Kind: marlowe.PubKeyCredential, Hash: h}}}
}

func mergedPaymentsLifecycle(network marlowe.Network) (Lifecycle, error) {
	buyer := marlowe.Party{Address: ownAddress(network, 0xb1)}
	seller := marlowe.Party{Address: ownAddress(network, 0x5e)}
	broker := marlowe.Party{Role: []byte("broker")}
	adaToken := marlowe.Token{}
	policy := make([]byte, 28)
	for i := range policy {
		policy[i] = 0x90 + byte(i)
	}
	gold := marlowe.Token{Currency: policy, Name: []byte("gold")}
	ada := func(n int64) *big.Int { return big.NewInt(n * 1_000_000) }
	pay := func(to marlowe.Party, t marlowe.Token, amount *big.Int, then marlowe.Contract) marlowe.Contract {
		return &marlowe.Pay{From: buyer, To: marlowe.Payee{Kind: marlowe.PayeeParty, Party: to}, Token: t, Value: &marlowe.Constant{N: amount}, Then: then}
	}
	const (
		t1       = 1_700_000_000_000 // the steps' times (2023-11-14)
		t2       = 1_700_000_600_000
		timeout1 = 1_700_003_600_000
		timeout2 = 1_700_007_200_000
	)
	payments := pay(seller, adaToken, ada(100),
		pay(broker, adaToken, ada(5),
			pay(seller, gold, big.NewInt(10),
				pay(seller, adaToken, ada(400),
					pay(seller, gold, big.NewInt(20), &marlowe.Close{})))))
	contract := &marlowe.When{
		Cases: []marlowe.Case{{
			Action: &marlowe.Deposit{IntoAccount: buyer, From: buyer, Token: adaToken, Amount: &marlowe.Constant{N: ada(505)}},
			Then: &marlowe.When{
				Cases: []marlowe.Case{{
					Action: &marlowe.Deposit{IntoAccount: buyer, From: buyer, Token: gold, Amount: &marlowe.Constant{N: big.NewInt(30)}},
					Then:   payments,
				}},
				Timeout: big.NewInt(timeout2), TimeoutContinuation: &marlowe.Close{},
			},
		}},
		Timeout: big.NewInt(timeout1), TimeoutContinuation: &marlowe.Close{},
	}
	lc := Lifecycle{
		Name:     "merged-payments",
		Contract: contract,
		State:    marlowe.State{Accounts: []marlowe.AccountEntry{{Party: buyer, Token: adaToken, Amount: ada(2)}}, MinTime: big.NewInt(0)},
	}
	inputs := []marlowe.TransactionInput{
		{Interval: marlowe.TimeInterval{From: big.NewInt(t1), To: big.NewInt(t1 + 999)},
			Inputs: []marlowe.Input{{Content: &marlowe.IDeposit{IntoAccount: buyer, From: buyer, Token: adaToken, Amount: ada(505)}}}},
		{Interval: marlowe.TimeInterval{From: big.NewInt(t2), To: big.NewInt(t2 + 999)},
			Inputs: []marlowe.Input{{Content: &marlowe.IDeposit{IntoAccount: buyer, From: buyer, Token: gold, Amount: big.NewInt(30)}}}},
	}
	st, c := lc.State, marlowe.Contract(lc.Contract)
	for i, in := range inputs {
		res, err := marlowe.ComputeTransaction(in, st, c)
		if err != nil {
			return lc, fmt.Errorf("step %d: %w", i, err)
		}
		step := LifecycleStep{Input: in, Contract: res.Contract, State: res.State}
		for _, p := range res.Payments {
			step.Payments = append(step.Payments, Payment(p))
		}
		lc.Steps = append(lc.Steps, step)
		st, c = res.State, res.Contract
	}
	return lc, nil
}
