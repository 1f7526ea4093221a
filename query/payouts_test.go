package query_test

import (
	"net/http"
	"net/url"
	"slices"
)

// checkPayouts checks the payout list, its filters and pages, and each payout.
func (f *fixture) checkPayouts() {
	t := f.t
	payouts, _ := pages[payoutJSON](f, "/payouts?limit=5")
	statuses := map[string]int{}
	for _, p := range payouts {
		statuses[p.Status]++
		var got payoutJSON
		f.get("/payouts/"+pathEscape(p.PayoutID), http.StatusOK).decode(t, &got)
		if got.PayoutID != p.PayoutID || got.Status != p.Status {
			t.Fatalf("payout %s: %+v", p.PayoutID, got)
		}
		if (p.Status == "withdrawn") != (p.Withdrawal != nil) {
			t.Fatalf("payout %s: status %s, withdrawal %v", p.PayoutID, p.Status, p.Withdrawal)
		}
	}
	if statuses["available"] == 0 || statuses["withdrawn"] == 0 || statuses["paid"] == 0 {
		t.Fatalf("payout statuses %v: the chain should have each", statuses)
	}
	for status, n := range statuses {
		got, _ := pages[payoutJSON](f, "/payouts?status="+status+"&limit=1000")
		if len(got) != n {
			t.Fatalf("status=%s: %d payouts, want %d", status, len(got), n)
		}
	}
	var role *payoutJSON
	for i := range payouts {
		if payouts[i].Role != nil && payouts[i].Policy != "" {
			role = &payouts[i]
			break
		}
	}
	got, _ := pages[payoutJSON](f, "/payouts?contractId="+url.QueryEscape(role.ContractID)+"&roleToken="+
		url.QueryEscape(role.Policy+"."+*role.Role))
	if !slices.ContainsFunc(got, func(p payoutJSON) bool { return p.PayoutID == role.PayoutID }) {
		t.Fatalf("the role token filter does not find payout %s", role.PayoutID)
	}
	withdrawals, _ := pages[withdrawalJSON](f, "/withdrawals?limit=3")
	if len(withdrawals) == 0 {
		t.Fatal("no withdrawals")
	}
	seen := map[string]bool{}
	taken := 0
	for _, w := range withdrawals {
		if seen[w.WithdrawalID] {
			t.Fatalf("withdrawal %s listed twice", w.WithdrawalID)
		}
		seen[w.WithdrawalID] = true
		var one withdrawalJSON
		f.get("/withdrawals/"+w.WithdrawalID, http.StatusOK).decode(t, &one)
		if len(one.Payouts) != len(w.Payouts) || len(one.Payouts) == 0 {
			t.Fatalf("withdrawal %s: %d payouts, listed with %d", w.WithdrawalID, len(one.Payouts), len(w.Payouts))
		}
		taken += len(one.Payouts)
	}
	if taken != statuses["withdrawn"] {
		t.Fatalf("withdrawals take %d payouts, %d are withdrawn", taken, statuses["withdrawn"])
	}
	c := withdrawals[0].Payouts[0].ContractID
	byContract, _ := pages[withdrawalJSON](f, "/withdrawals?contractId="+url.QueryEscape(c))
	if len(byContract) == 0 {
		t.Fatalf("withdrawals of %s: none", c)
	}
}
