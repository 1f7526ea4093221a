package query_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/actors/pipeline/projectiontest"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/query"
)

// The answers' shapes, as a client reads them.
type (
	blockJSON struct {
		Slot    uint64 `json:"slot"`
		BlockNo uint64 `json:"blockNo"`
		Hash    string `json:"hash"`
	}
	pageJSON struct {
		Results json.RawMessage `json:"results"`
		Next    *string         `json:"next"`
		Cursor  *string         `json:"cursor"`
		Total   *int64          `json:"total"`
		Seq     int64           `json:"seq"`
		Block   blockJSON       `json:"block"`
	}
	contractJSON struct {
		ContractID string                     `json:"contractId"`
		Policy     string                     `json:"roleTokenMintingPolicyId"`
		Tags       map[string]json.RawMessage `json:"tags"`
		Status     string                     `json:"status"`
		Seq        int64                      `json:"seq"`
		Steps      int                        `json:"steps"`
		LastSeq    int64                      `json:"lastSeq"`
		Current    json.RawMessage            `json:"currentContract"`
		State      json.RawMessage            `json:"state"`
		Payouts    []struct {
			PayoutID string `json:"payoutId"`
			Status   string `json:"status"`
		} `json:"payouts"`
	}
	txJSON struct {
		TransactionID string `json:"transactionId"`
		Seq           int64  `json:"seq"`
		Kind          string `json:"kind"`
	}
	payoutJSON struct {
		PayoutID   string  `json:"payoutId"`
		ContractID string  `json:"contractId"`
		Policy     string  `json:"roleTokenMintingPolicyId"`
		Role       *string `json:"role"`
		Address    *string `json:"address"`
		Status     string  `json:"status"`
		Withdrawal *struct {
			WithdrawalID string `json:"withdrawalId"`
		} `json:"withdrawal"`
	}
	withdrawalJSON struct {
		WithdrawalID string       `json:"withdrawalId"`
		Payouts      []payoutJSON `json:"payouts"`
	}
	recordJSON struct {
		Seq          int64  `json:"seq"`
		Kind         string `json:"kind"`
		RolledBackBy *int64 `json:"rolledBackBy"`
	}
)

// pages follows next links from path and returns every result.
func pages[T any](f *fixture, path string) ([]T, *pageJSON) {
	f.t.Helper()
	var out []T
	var first *pageJSON
	for n := 0; ; n++ {
		a := f.get(path, http.StatusOK)
		var p pageJSON
		a.decode(f.t, &p)
		if first == nil {
			first = &p
		}
		var items []T
		must(f.t, json.Unmarshal(p.Results, &items))
		out = append(out, items...)
		if strconv.FormatInt(p.Seq, 10) != a.header.Get(query.HeaderSeq) {
			f.t.Fatalf("%s: envelope seq %d, header %s", path, p.Seq, a.header.Get(query.HeaderSeq))
		}
		if p.Next == nil {
			return out, first
		}
		if n > 10000 || len(items) == 0 {
			f.t.Fatalf("%s: a next link after an empty page", path)
		}
		path = *p.Next
	}
}

// TestEndpointsAgainstDevnet asks every endpoint about a generated chain
// (with rollbacks) and checks the answers against the chain's activity,
// against each other and against the OpenAPI document.
func TestEndpointsAgainstDevnet(t *testing.T) {
	for _, backend := range projectiontest.Backends {
		t.Run(backend, func(t *testing.T) {
			f := newFixture(t, backend, 11, 400, nil)
			head := f.p.Projection.Applied().Seq
			contracts, first := pages[contractJSON](f, "/contracts?limit=7")
			if first.Total == nil || int(*first.Total) != len(contracts) || first.Seq != head {
				t.Fatalf("%d contracts, total %v, seq %d (head %d)", len(contracts), first.Total, first.Seq, head)
			}
			creates := 0
			for _, a := range f.p.Activity() {
				if a.Kind == devnet.ActivityCreate {
					creates++
				}
			}
			if len(contracts) != creates || creates == 0 {
				t.Fatalf("%d contracts, the chain has %d creations", len(contracts), creates)
			}
			for i := 1; i < len(contracts); i++ {
				if contracts[i].Seq <= contracts[i-1].Seq {
					t.Fatal("contracts out of creation order")
				}
			}
			desc, _ := pages[contractJSON](f, "/contracts?order=desc&limit=9")
			slices.Reverse(desc)
			if len(desc) != len(contracts) || desc[0].ContractID != contracts[0].ContractID {
				t.Fatal("descending order differs")
			}
			f.checkContracts(contracts)
			f.checkFilters(contracts)
			f.checkPayouts()
			f.checkOthers()
			f.checkStats()
			f.checkNext(contracts)
			f.checkSources(contracts)
			for _, op := range []string{"GET /contracts", "GET /contracts/{contractId}", "GET /contracts/{contractId}/transactions",
				"GET /contracts/{contractId}/transactions/{txId}", "GET /contracts/{contractId}/history",
				"GET /contracts/{contractId}/next", "GET /payouts",
				"GET /payouts/{payoutId}", "GET /withdrawals", "GET /withdrawals/{txId}", "GET /transactions/{txId}", "GET /sources/{sourceId}", "GET /sources/{sourceId}/closure", "GET /stats", "GET /status", "GET /healthz",
				"GET /readyz", "GET /openapi.json", "GET /metrics"} {
				if !f.spec.hit[op] {
					t.Errorf("%s was never answered 200", op)
				}
			}
			for path, item := range f.spec.doc.Paths.Map() {
				if item.Extensions["x-served-by"] != nil {
					continue // another package's handler: TestStreamingRoutesAgainstSpec
				}
				if item.Get != nil && !f.spec.hit["GET "+path] {
					t.Errorf("the OpenAPI document's GET %s was never answered 200", path)
				}
			}
		})
	}
}

func (f *fixture) checkContracts(contracts []contractJSON) {
	t := f.t
	rolledBack, steps := 0, 0
	for i, c := range contracts {
		id := pathEscape(c.ContractID)
		var full contractJSON
		f.get("/contracts/"+id, http.StatusOK).decode(t, &full)
		if full.ContractID != c.ContractID || full.Seq != c.Seq || len(full.Current) == 0 {
			t.Fatalf("contract %s: %+v", c.ContractID, full)
		}
		if (full.Status == "closed") != (string(full.Current) == "null") {
			t.Fatalf("contract %s: status %s with current contract %s", c.ContractID, full.Status, full.Current)
		}
		txs, _ := pages[txJSON](f, "/contracts/"+id+"/transactions?limit=2")
		if len(txs) != c.Steps {
			t.Fatalf("contract %s: %d transactions, %d steps", c.ContractID, len(txs), c.Steps)
		}
		steps += len(txs)
		for _, tx := range txs {
			var got struct {
				TransactionID string          `json:"transactionId"`
				Details       json.RawMessage `json:"details"`
			}
			f.get("/contracts/"+id+"/transactions/"+tx.TransactionID, http.StatusOK).decode(t, &got)
			if got.TransactionID != tx.TransactionID || len(got.Details) < 2 {
				t.Fatalf("transaction %s: %+v", tx.TransactionID, got)
			}
			// The same step by its transaction id alone.
			var byTx struct {
				ContractID    string          `json:"contractId"`
				TransactionID string          `json:"transactionId"`
				Details       json.RawMessage `json:"details"`
			}
			f.get("/transactions/"+tx.TransactionID, http.StatusOK).decode(t, &byTx)
			if byTx.ContractID != c.ContractID || byTx.TransactionID != tx.TransactionID || string(byTx.Details) != string(got.Details) {
				t.Fatalf("/transactions/%s: %+v, want the step of %s", tx.TransactionID, byTx, c.ContractID)
			}
		}
		if i%3 != 0 && i != len(contracts)-1 {
			continue
		}
		current, _ := pages[recordJSON](f, "/contracts/"+id+"/history?limit=3")
		all, _ := pages[recordJSON](f, "/contracts/"+id+"/history?includeRolledBack=true&limit=3")
		if len(current) != 1+c.Steps+countKind(current, "payout_withdrawn") || current[0].Kind != "contract_created" {
			t.Fatalf("contract %s: history of %d records for %d steps", c.ContractID, len(current), c.Steps)
		}
		for _, r := range current {
			if r.RolledBackBy != nil {
				t.Fatalf("contract %s: a rolled-back record in the current history", c.ContractID)
			}
		}
		if len(all) < len(current) {
			t.Fatalf("contract %s: %d records with rolled-back ones, %d without", c.ContractID, len(all), len(current))
		}
		rolledBack += len(all) - len(current)
	}
	if steps == 0 {
		t.Fatal("no contract has steps")
	}
	t.Logf("%d contracts, %d steps, %d rolled-back records seen in histories", len(contracts), steps, rolledBack)
}

func countKind(rs []recordJSON, kind string) int {
	n := 0
	for _, r := range rs {
		if r.Kind == kind {
			n++
		}
	}
	return n
}

// checkFilters asks the filters about the contracts' own attributes.
func (f *fixture) checkFilters(contracts []contractJSON) {
	t := f.t
	ids := func(cs []contractJSON) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.ContractID)
		}
		return out
	}
	tested := 0
	for _, c := range contracts {
		var full struct {
			State json.RawMessage `json:"state"`
		}
		f.get("/contracts/"+pathEscape(c.ContractID), http.StatusOK).decode(t, &full)
		for tag := range c.Tags {
			got, _ := pages[contractJSON](f, "/contracts?tag="+url.QueryEscape(tag))
			if !slices.Contains(ids(got), c.ContractID) {
				t.Fatalf("tag %q does not find %s", tag, c.ContractID)
			}
			for _, g := range got {
				if _, ok := g.Tags[tag]; !ok {
					t.Fatalf("tag %q finds %s without it", tag, g.ContractID)
				}
			}
			tested++
		}
		if c.Policy != "" {
			got, _ := pages[contractJSON](f, "/contracts?roleCurrency="+c.Policy+"&status="+c.Status)
			if !slices.Contains(ids(got), c.ContractID) {
				t.Fatalf("roleCurrency %s does not find %s", c.Policy, c.ContractID)
			}
			tested++
		}
	}
	// Parties: the roles and addresses the payouts went to are parties of
	// their contracts; a role and an address together find both contracts.
	payouts, _ := pages[payoutJSON](f, "/payouts?limit=1000")
	var role, addr *payoutJSON
	for i, p := range payouts {
		switch {
		case p.Role != nil && p.Policy != "":
			got, _ := pages[contractJSON](f, "/contracts?partyRole="+url.QueryEscape(p.Policy+"."+*p.Role))
			if !slices.Contains(ids(got), p.ContractID) {
				t.Fatalf("partyRole %s.%s does not find %s", p.Policy, *p.Role, p.ContractID)
			}
			role = &payouts[i]
		case p.Address != nil:
			got, _ := pages[contractJSON](f, "/contracts?partyAddress="+url.QueryEscape(*p.Address))
			if !slices.Contains(ids(got), p.ContractID) {
				t.Fatalf("partyAddress %s does not find %s", *p.Address, p.ContractID)
			}
			addr = &payouts[i]
		}
		tested++
	}
	if role == nil || addr == nil {
		t.Fatal("the chain has no role payout or no address payout")
	}
	either, _ := pages[contractJSON](f, "/contracts?partyRole="+url.QueryEscape(role.Policy+"."+*role.Role)+
		"&partyAddress="+url.QueryEscape(*addr.Address))
	if !slices.Contains(ids(either), role.ContractID) || !slices.Contains(ids(either), addr.ContractID) {
		t.Fatal("partyRole OR partyAddress misses one of the two")
	}
	if tested == 0 {
		t.Fatal("no filter was tested")
	}
	// contractId: the listed contracts, in creation order, with the other
	// filters.
	pick := []string{contracts[len(contracts)-1].ContractID, contracts[0].ContractID, contracts[len(contracts)/2].ContractID}
	byID, _ := pages[contractJSON](f, "/contracts?contractId="+url.QueryEscape(pick[0])+"&contractId="+url.QueryEscape(pick[1])+
		"&contractId="+url.QueryEscape(pick[2])+"&limit=2")
	if got := ids(byID); len(got) != 3 || got[0] != pick[1] || got[1] != pick[2] || got[2] != pick[0] {
		t.Fatalf("contractId %v lists %v", pick, got)
	}
	byID, _ = pages[contractJSON](f, "/contracts?contractId="+url.QueryEscape(pick[0])+"&status="+map[string]string{"open": "closed", "closed": "open"}[contracts[len(contracts)-1].Status])
	if len(byID) != 0 {
		t.Fatalf("contractId with the other status lists %v", ids(byID))
	}
	f.get("/contracts?contractId=nope", http.StatusBadRequest)
	none, _ := pages[contractJSON](f, "/contracts?tag=no-such-tag")
	if len(none) != 0 {
		t.Fatal("an unknown tag finds contracts")
	}
	open, first := pages[contractJSON](f, "/contracts?status=open&limit=1000")
	for _, c := range open {
		if c.Status != "open" {
			t.Fatal("status=open lists a closed contract")
		}
	}
	if first.Total == nil || int(*first.Total) != len(open) {
		t.Fatalf("status=open: total %v, %d contracts", first.Total, len(open))
	}
}

// checkOthers asks the service endpoints and the not-found cases.
func (f *fixture) checkOthers() {
	t := f.t
	var st struct {
		HistorySeq int64 `json:"historySeq"`
		Projection struct {
			Seq int64 `json:"seq"`
			Lag int64 `json:"lag"`
		} `json:"projection"`
	}
	f.get("/status", http.StatusOK).decode(t, &st)
	if st.HistorySeq != f.p.Handle.Head() || st.Projection.Seq != st.HistorySeq || st.Projection.Lag != 0 {
		t.Fatalf("status %+v", st)
	}
	f.get("/healthz", http.StatusOK)
	f.get("/readyz", http.StatusOK)
	f.get("/openapi.json", http.StatusOK)
	a := f.get("/metrics", http.StatusOK)
	if !strings.Contains(string(a.body), `marlowe_query_request_duration_seconds_bucket{code="200",route="GET /contracts"`) {
		t.Fatal("no latency histogram for GET /contracts")
	}
	zero := strings.Repeat("0", 64)
	for _, path := range []string{"/contracts/" + zero + "%230", "/contracts/" + zero + "%230/transactions",
		"/contracts/" + zero + "%230/transactions/" + zero, "/contracts/" + zero + "%230/history",
		"/payouts/" + zero + "%231", "/withdrawals/" + zero, "/transactions/" + zero, "/nope", "/contracts/x/y/z"} {
		var e struct{ Code string }
		f.get(path, http.StatusNotFound).decode(t, &e)
		if e.Code != "not_found" {
			t.Fatalf("%s: code %q", path, e.Code)
		}
	}
	res, err := f.client.Post(f.base+"/contracts", "application/json", strings.NewReader("{}"))
	must(t, err)
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /contracts: %d", res.StatusCode)
	}
}

// TestStatusSlotClock: /status gives the network's slot clock when the
// server has one (the explorer's pages show block times on any network with
// it), and nothing when it has none.
func TestStatusSlotClock(t *testing.T) {
	type clock struct {
		ZeroSlot         uint64 `json:"zeroSlot"`
		ZeroTimeMillis   int64  `json:"zeroTimeMillis"`
		SlotLengthMillis int64  `json:"slotLengthMillis"`
	}
	var st struct {
		SlotClock *clock `json:"slotClock"`
	}
	f := newFixture(t, projectiontest.Backends[0], 12, 40, withRuntime)
	f.get("/status", http.StatusOK).decode(t, &st)
	want := clock{devnetSlots.ZeroSlot, devnetSlots.ZeroTimeMillis, devnetSlots.SlotLengthMillis}
	if st.SlotClock == nil || *st.SlotClock != want {
		t.Fatalf("slotClock %+v, want %+v", st.SlotClock, want)
	}
	st.SlotClock = nil
	newFixture(t, projectiontest.Backends[0], 12, 40, nil).get("/status", http.StatusOK).decode(t, &st)
	if st.SlotClock != nil {
		t.Fatalf("slotClock %+v without a clock", st.SlotClock)
	}
}
