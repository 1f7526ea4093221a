package query_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/actors/pipeline/projectiontest"
	"github.com/marlowe-follower/follower/query"
)

func contractKey(c *rtContract) string { return c.ContractID }
func txKey(t *rtTx) string             { return t.TransactionID }
func payoutKey(p *rtPayout) string     { return p.PayoutID }
func withdrawalKey(w *rtWithdrawal) string {
	return w.WithdrawalID
}

// TestRuntimeViewAgainstDevnet asks every route of the runtime view about
// a generated chain and checks each answer against the Runtime's golden
// document, against the native API and against the other answers.
func TestRuntimeViewAgainstDevnet(t *testing.T) {
	for _, backend := range projectiontest.Backends {
		t.Run(backend, func(t *testing.T) {
			f := newFixture(t, backend, 11, 400, withRuntime)
			f.rtGet("/healthcheck", nil, http.StatusOK)

			// Contracts: the view lists what the native API lists, newest first.
			native, _ := pages[contractJSON](f, "/contracts?limit=1000&order=desc")
			list := rtPages(f, "/contracts", "contractId", "", contractKey)
			if len(list) != len(native) || len(list) == 0 {
				t.Fatalf("%d contracts on the view, %d on the native API", len(list), len(native))
			}
			for i, item := range list {
				c := item.Resource
				if c.ContractID != native[i].ContractID || c.Seq != native[i].Seq || c.Version != "v1" || c.Status != "confirmed" ||
					c.ContractStatus != native[i].Status {
					t.Fatalf("contract %d: %+v, native %+v", i, c, native[i])
				}
				id := pathEscape(c.ContractID)
				if item.Links["contract"] != "contracts/"+id || item.Links["transactions"] != "contracts/"+id+"/transactions" {
					t.Fatalf("links %v", item.Links)
				}
			}
			steps, payouts := 0, 0
			for i := range native {
				id := pathEscape(native[i].ContractID)
				f.get("/contracts/"+id, http.StatusOK).decode(t, &native[i])
				n := native[i]
				var detail rtItem[rtContract]
				f.rtGet("/contracts/"+id, nil, http.StatusOK).decode(t, &detail)
				c := detail.Resource
				if !jsonEqual(c.Current, n.Current) || !jsonEqual(c.State, n.State) || detail.Links["transactions"] != "contracts/"+id+"/transactions" {
					t.Fatalf("%s: the view's contract differs from the native one", n.ContractID)
				}
				unclaimed := 0
				for _, p := range n.Payouts {
					if p.Status == "available" {
						unclaimed++
					}
				}
				if len(c.UnclaimedPayouts) != unclaimed {
					t.Fatalf("%s: %d unclaimed payouts, native %d available", n.ContractID, len(c.UnclaimedPayouts), unclaimed)
				}
				steps += f.checkRuntimeSteps(n)
			}
			if steps == 0 {
				t.Fatal("no steps were checked")
			}

			// Payouts: the native API's role payouts.
			nativePayouts, _ := pages[payoutJSON](f, "/payouts?limit=1000")
			var roles []payoutJSON
			for _, p := range nativePayouts {
				if p.Role != nil {
					roles = append(roles, p)
				}
			}
			slices.Reverse(roles)
			rp := rtPages(f, "/payouts", "payoutId", "", payoutKey)
			if len(rp) != len(roles) || len(rp) == 0 {
				t.Fatalf("%d payouts on the view, %d role payouts on the native API", len(rp), len(roles))
			}
			withdrawn := 0
			for i, item := range rp {
				p := item.Resource
				if p.PayoutID != roles[i].PayoutID || p.Role.AssetName != *roles[i].Role || p.Role.PolicyID != roles[i].Policy {
					t.Fatalf("payout %d: %+v, native %+v", i, p, roles[i])
				}
				var d rtItem[rtPayout]
				f.rtGet("/payouts/"+pathEscape(p.PayoutID), nil, http.StatusOK).decode(t, &d)
				if !strings.HasPrefix(d.Resource.PayoutValidatorAddress, "addr_test1w") {
					t.Fatalf("payout validator address %q", d.Resource.PayoutValidatorAddress)
				}
				if (p.WithdrawalID != nil) != (d.Links["withdrawal"] != "") || p.Status != roles[i].Status {
					t.Fatalf("payout %s: withdrawal %v, links %v", p.PayoutID, p.WithdrawalID, d.Links)
				}
				if p.WithdrawalID != nil {
					withdrawn++
				}
				payouts++
			}
			for _, status := range []string{"available", "withdrawn"} {
				got := rtPages(f, "/payouts?status="+status, "payoutId", "", payoutKey)
				for _, item := range got {
					if item.Resource.Status != status {
						t.Fatalf("status=%s listed a %s payout", status, item.Resource.Status)
					}
				}
			}
			// Address payouts are not the Runtime's.
			for _, p := range nativePayouts {
				if p.Address != nil {
					f.rtGet("/payouts/"+pathEscape(p.PayoutID), nil, http.StatusNotFound)
					break
				}
			}

			// Withdrawals.
			nativeW, _ := pages[withdrawalJSON](f, "/withdrawals?limit=1000")
			slices.Reverse(nativeW)
			rw := rtPages(f, "/withdrawals", "withdrawalId", "", withdrawalKey)
			if len(rw) != len(nativeW) || len(rw) == 0 || withdrawn == 0 {
				t.Fatalf("%d withdrawals on the view, %d native, %d withdrawn payouts", len(rw), len(nativeW), withdrawn)
			}
			for i, item := range rw {
				if item.Resource.WithdrawalID != nativeW[i].WithdrawalID || item.Resource.Status != "confirmed" ||
					item.Links["withdrawal"] != "withdrawals/"+item.Resource.WithdrawalID || item.Links["contract"] == "" {
					t.Fatalf("withdrawal %d: %+v %v", i, item.Resource, item.Links)
				}
				var d rtWithdrawal
				f.rtGet("/withdrawals/"+item.Resource.WithdrawalID, nil, http.StatusOK).decode(t, &d)
				if len(d.Payouts) == 0 {
					t.Fatalf("withdrawal %s shows no payouts", d.WithdrawalID)
				}
			}
			// By roles currency: each withdrawal of a currency's payouts.
			cur := rp[0].Resource.Role.PolicyID
			for _, item := range rtPages(f, "/withdrawals?roleCurrency="+cur, "withdrawalId", "", withdrawalKey) {
				var d rtWithdrawal
				f.rtGet("/withdrawals/"+item.Resource.WithdrawalID, nil, http.StatusOK).decode(t, &d)
				if !slices.ContainsFunc(d.Payouts, func(p rtPayout) bool { return p.Role.PolicyID == cur }) {
					t.Fatalf("roleCurrency=%s listed withdrawal %s of other currencies", cur, d.WithdrawalID)
				}
			}

			f.checkRuntimeNext(native)
			f.checkRuntimeSources(native)
			f.checkRuntimeErrors(native[0].ContractID)
			for _, op := range []string{"GET /healthcheck", "GET /contracts", "GET /contracts/{contractId}",
				"GET /contracts/{contractId}/transactions", "GET /contracts/{contractId}/transactions/{transactionId}",
				"GET /contracts/{contractId}/next", "GET /payouts", "GET /payouts/{payoutId}", "GET /withdrawals",
				"GET /withdrawals/{withdrawalId}", "GET /contracts/sources/{contractSourceId}",
				"GET /contracts/sources/{contractSourceId}/adjacency", "GET /contracts/sources/{contractSourceId}/closure"} {
				if !loadGoldenSpec(t).hit[op] {
					t.Errorf("%s was never answered", op)
				}
			}
			if doc := f.rtGet("/openapi.json", nil, http.StatusOK); !bytes.Equal(doc.body, query.RuntimeOpenAPI()) {
				t.Error("/runtime/openapi.json is not the view's document")
			}
			for path := range loadViewSpec(t).doc.Paths.Map() {
				if !loadViewSpec(t).hit["GET "+path] {
					t.Errorf("the view's document's GET %s was never answered 2xx", path)
				}
			}
			t.Logf("%d contracts, %d steps, %d payouts, %d withdrawals", len(list), steps, payouts, len(rw))
		})
	}
}

// checkRuntimeSteps compares a contract's steps on the view with the native
// ones and checks each step's details: the contract and state it started
// from are the previous step's output, the consuming step is the next one,
// and the semantics replayed give the step's output.
func (f *fixture) checkRuntimeSteps(n contractJSON) int {
	t := f.t
	id := pathEscape(n.ContractID)
	native, _ := pages[txJSON](f, "/contracts/"+id+"/transactions?limit=1000")
	var applied []txJSON
	for _, tx := range native {
		if tx.Kind == "applied" {
			applied = append(applied, tx)
		}
	}
	asc := rtPages(f, "/contracts/"+id+"/transactions", "transactionId", "transactionId;order asc", txKey)
	if len(asc) != len(applied) {
		t.Fatalf("%s: %d steps on the view, %d applied natively", n.ContractID, len(asc), len(applied))
	}
	var prev *rtTx
	for i, item := range asc {
		if item.Resource.TransactionID != applied[i].TransactionID {
			t.Fatalf("%s: step %d is %s, native %s", n.ContractID, i, item.Resource.TransactionID, applied[i].TransactionID)
		}
		var d rtItem[rtTx]
		f.rtGet("/contracts/"+id+"/transactions/"+item.Resource.TransactionID, nil, http.StatusOK).decode(t, &d)
		tx := d.Resource
		if prev == nil {
			if tx.InputUTxO != n.ContractID || d.Links["previous"] != "" {
				t.Fatalf("%s: the first step spends %s", n.ContractID, tx.InputUTxO)
			}
		} else {
			if prev.OutputUTxO == nil || *prev.OutputUTxO != tx.InputUTxO || !jsonEqual(prev.OutputContract, tx.InputContract) ||
				!jsonEqual(prev.OutputState, tx.InputState) {
				t.Fatalf("%s: step %s does not start where %s ended", n.ContractID, tx.TransactionID, prev.TransactionID)
			}
			if prev.ConsumingTx == nil || *prev.ConsumingTx != tx.TransactionID {
				t.Fatalf("%s: step %s is consumed by %v, not %s", n.ContractID, prev.TransactionID, prev.ConsumingTx, tx.TransactionID)
			}
			if d.Links["previous"] != "contracts/"+id+"/transactions/"+prev.TransactionID {
				t.Fatalf("previous link %q", d.Links["previous"])
			}
		}
		if len(tx.SemanticOutput.Error) > 0 {
			t.Fatalf("%s: the semantics refuse step %s: %s", n.ContractID, tx.TransactionID, tx.SemanticOutput.Error)
		}
		if tx.OutputUTxO != nil && (!jsonEqual(tx.SemanticOutput.Contract, tx.OutputContract) || !jsonEqual(tx.SemanticOutput.State, tx.OutputState)) {
			t.Fatalf("%s: step %s replayed:\n%s %s\nstored:\n%s %s", n.ContractID, tx.TransactionID,
				tx.SemanticOutput.Contract, tx.SemanticOutput.State, tx.OutputContract, tx.OutputState)
		}
		if tx.OutputUTxO == nil && string(tx.SemanticOutput.Contract) != `"close"` {
			t.Fatalf("%s: closing step %s replays to %s", n.ContractID, tx.TransactionID, tx.SemanticOutput.Contract)
		}
		if !jsonEqual(tx.SemanticInput.Inputs, tx.Inputs) {
			t.Fatal("reconstructed inputs differ from the step's")
		}
		before, err1 := time.Parse(time.RFC3339Nano, tx.InvalidBefore)
		after, err2 := time.Parse(time.RFC3339Nano, tx.InvalidHereafter)
		if err1 != nil || err2 != nil || before.UnixMilli() != tx.SemanticInput.Interval.From || after.UnixMilli()-1 != tx.SemanticInput.Interval.To {
			t.Fatalf("validity %s..%s, semantic interval %+v", tx.InvalidBefore, tx.InvalidHereafter, tx.SemanticInput.Interval)
		}
		t := tx
		prev = &t
	}
	if prev != nil && prev.ConsumingTx != nil {
		f.t.Fatalf("%s: the last step is consumed by %s", n.ContractID, *prev.ConsumingTx)
	}
	// Newest first is the reverse.
	desc := rtPages(f, "/contracts/"+id+"/transactions", "transactionId", "", txKey)
	for i := range desc {
		if desc[i].Resource.TransactionID != asc[len(asc)-1-i].Resource.TransactionID {
			t.Fatalf("%s: descending steps differ", n.ContractID)
		}
	}
	return len(asc)
}

// checkRuntimeNext asks /next of open contracts on the view and the native
// API, in both party forms.
func (f *fixture) checkRuntimeNext(contracts []contractJSON) {
	t := f.t
	asked := 0
	for _, c := range contracts {
		id := pathEscape(c.ContractID)
		if c.Status == "closed" {
			f.rtGet("/contracts/"+id+"/next?validityStart=2024-01-01T00:00:00Z&validityEnd=2024-01-01T00:01:00Z", nil, http.StatusNotFound)
			continue
		}
		var st struct {
			MinTime int64 `json:"minTime"`
		}
		must(t, json.Unmarshal(c.State, &st))
		start := time.UnixMilli(st.MinTime).UTC()
		end := start.Add(time.Millisecond)
		q := "validityStart=" + url.QueryEscape(start.Format(time.RFC3339Nano)) + "&validityEnd=" + url.QueryEscape(end.Format(time.RFC3339Nano))
		view := f.rtGet("/contracts/"+id+"/next?"+q, nil, http.StatusOK)
		nat := f.get("/contracts/"+id+"/next?"+q, http.StatusOK)
		if !bytes.Equal(view.body, nat.body) {
			t.Fatalf("/next differs:\nview   %s\nnative %s", view.body, nat.body)
		}
		var next struct {
			CanReduce bool `json:"can_reduce"`
			Inputs    struct {
				Deposits []struct {
					Party json.RawMessage `json:"party"`
				} `json:"deposits"`
			} `json:"applicable_inputs"`
		}
		view.decode(t, &next)
		for _, d := range next.Inputs.Deposits {
			var party struct {
				Role    *string `json:"role_token"`
				Address *string `json:"address"`
			}
			must(t, json.Unmarshal(d.Party, &party))
			plain, sdk := "party=", "party%5B0%5D%5Brole_token%5D="
			if party.Role != nil {
				plain, sdk = plain+url.QueryEscape(*party.Role), sdk+url.QueryEscape(*party.Role)
			} else {
				plain, sdk = plain+url.QueryEscape(*party.Address), "party%5B0%5D%5Baddress%5D="+url.QueryEscape(*party.Address)
			}
			a := f.rtGet("/contracts/"+id+"/next?"+q+"&"+plain, nil, http.StatusOK)
			b := f.rtGet("/contracts/"+id+"/next?"+q+"&"+sdk, nil, http.StatusOK)
			if !bytes.Equal(a.body, b.body) || !bytes.Contains(a.body, d.Party) {
				t.Fatalf("party filters differ:\n%s\n%s", a.body, b.body)
			}
			asked++
			break
		}
	}
	if asked == 0 {
		t.Fatal("no open contract had a deposit to make")
	}
}

// checkNext asks the native /next of every contract: open ones answer,
// closed ones are 404 contract_closed, a reversed interval is 400.
func (f *fixture) checkNext(contracts []contractJSON) {
	t := f.t
	open := 0
	for _, c := range contracts {
		id := pathEscape(c.ContractID)
		q := "validityStart=2024-01-01T00:00:00Z&validityEnd=2024-01-01T00:01:00Z"
		if c.Status == "closed" {
			var e struct {
				Code string `json:"code"`
			}
			f.get("/contracts/"+id+"/next?"+q, http.StatusNotFound).decode(t, &e)
			if e.Code != "contract_closed" {
				t.Fatalf("/next of a closed contract: %q", e.Code)
			}
			continue
		}
		open++
		f.get("/contracts/"+id+"/next?"+q, http.StatusOK)
		f.get("/contracts/"+id+"/next?validityStart=2024-01-01T00:01:00Z&validityEnd=2024-01-01T00:00:00Z", http.StatusBadRequest)
		f.get("/contracts/"+id+"/next?"+q+"&bogus=1", http.StatusBadRequest)
	}
	if open == 0 {
		t.Fatal("no open contract")
	}
}

// jsonEqual compares JSON values; an absent one is null.
func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 {
		a = json.RawMessage("null")
	}
	if len(b) == 0 {
		b = json.RawMessage("null")
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}
