package query_test

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/marlowe-follower/follower/contracts/marlowe"
)

// The contract sources the chain revealed, on both APIs: every created
// contract's initial contract and every merkleized continuation a step
// carried, under the datum hash of the contract (the Marlowe Runtime's
// ContractSourceId).

type (
	sourceJSON struct {
		SourceID   string          `json:"sourceId"`
		Contract   json.RawMessage `json:"contract"`
		Expanded   bool            `json:"expanded"`
		Adjacency  []string        `json:"adjacency"`
		Unrevealed []string        `json:"unrevealed"`
		RevealedBy struct {
			ContractID    string `json:"contractId"`
			TransactionID string `json:"transactionId"`
			Seq           int64  `json:"seq"`
		} `json:"revealedBy"`
	}
	closureJSON struct {
		SourceID   string   `json:"sourceId"`
		Closure    []string `json:"closure"`
		Unrevealed []string `json:"unrevealed"`
	}
	rtIDs struct {
		Results    []string `json:"results"`
		Unrevealed []string `json:"unrevealed"`
	}
	// stepInputs is the part of a step's details that reveals sources.
	stepInputs struct {
		Details struct {
			Inputs []json.RawMessage `json:"inputs"` // "input_notify" or an object
		} `json:"details"`
	}
)

// revealed is what the chain revealed: each source's contract by hash.
type revealed map[string]json.RawMessage

// revealedSources collects the sources of the contracts (with their
// bodies, as GET /contracts/{id} answers them) from the native API: their
// initial contracts and the continuations of their steps' merkleized
// inputs. It reports how many were continuations.
func (f *fixture) revealedSources(contracts []contractJSON) (revealed, int) {
	t := f.t
	out := revealed{}
	continuations := 0
	for _, c := range contracts {
		var body struct {
			Initial  json.RawMessage `json:"initialContract"`
			SourceID string          `json:"sourceId"`
		}
		id := pathEscape(c.ContractID)
		f.get("/contracts/"+id, http.StatusOK).decode(t, &body)
		ct, err := marlowe.ParseContractJSON(body.Initial)
		must(t, err)
		h := marlowe.ContinuationHash(ct)
		if body.SourceID != hex.EncodeToString(h[:]) {
			t.Fatalf("contract %s: sourceId %q, the initial contract's hash %x", c.ContractID, body.SourceID, h)
		}
		out[body.SourceID] = body.Initial
		txs, _ := pages[txJSON](f, "/contracts/"+id+"/transactions?limit=1000")
		for _, tx := range txs {
			if tx.Kind != "applied" {
				continue
			}
			var d stepInputs
			f.get("/contracts/"+id+"/transactions/"+tx.TransactionID, http.StatusOK).decode(t, &d)
			for _, raw := range d.Details.Inputs {
				var in struct {
					Hash         string          `json:"continuation_hash"`
					Continuation json.RawMessage `json:"merkleized_continuation"`
				}
				if json.Unmarshal(raw, &in) != nil {
					continue // a plain notify
				}
				if in.Hash != "" && len(in.Continuation) > 0 {
					out[in.Hash] = in.Continuation
					continuations++
				}
			}
		}
	}
	return out, continuations
}

// checkSources asks the native API for every revealed source, its
// references and its closure, expanded and not.
func (f *fixture) checkSources(contracts []contractJSON) {
	t := f.t
	srcs, continuations := f.revealedSources(contracts)
	if continuations == 0 || len(srcs) <= len(contracts)/2 {
		t.Fatalf("%d sources, %d of them continuations, of %d contracts: the chain reveals too little to check", len(srcs), continuations, len(contracts))
	}
	for h, want := range srcs {
		var s sourceJSON
		f.get("/sources/"+h, http.StatusOK).decode(t, &s)
		if s.SourceID != h || !jsonEqual(s.Contract, want) || s.Expanded || s.RevealedBy.ContractID == "" || s.RevealedBy.Seq <= 0 {
			t.Fatalf("source %s: %+v, want the contract %s", h, s, want)
		}
		ct, err := marlowe.ParseContractJSON(want)
		must(t, err)
		var adj []string
		for _, r := range marlowe.MerkleizedHashes(ct) {
			adj = append(adj, hex.EncodeToString(r))
		}
		if !slices.Equal(s.Adjacency, nonNil(adj)) {
			t.Fatalf("source %s: adjacency %v, want %v", h, s.Adjacency, adj)
		}
		for _, r := range s.Adjacency {
			_, known := srcs[r]
			if known == slices.Contains(s.Unrevealed, r) {
				t.Fatalf("source %s: reference %s revealed %v, unrevealed %v", h, r, known, s.Unrevealed)
			}
		}
		var cl closureJSON
		f.get("/sources/"+h+"/closure", http.StatusOK).decode(t, &cl)
		if !slices.Contains(cl.Closure, h) || !slices.IsSorted(cl.Closure) || !slices.IsSorted(cl.Unrevealed) {
			t.Fatalf("closure of %s: %+v", h, cl)
		}
		for _, r := range cl.Closure {
			if _, ok := srcs[r]; !ok {
				t.Fatalf("closure of %s: %s was never revealed", h, r)
			}
		}
		for _, r := range cl.Unrevealed {
			if _, ok := srcs[r]; ok {
				t.Fatalf("closure of %s: %s is revealed", h, r)
			}
		}
		var ex sourceJSON
		f.get("/sources/"+h+"?expand=true", http.StatusOK).decode(t, &ex)
		ect, err := marlowe.ParseContractJSON(ex.Contract)
		must(t, err)
		for _, r := range marlowe.MerkleizedHashes(ect) {
			if !slices.Contains(cl.Unrevealed, hex.EncodeToString(r)) {
				t.Fatalf("source %s expanded: a merkleized case of the revealed %x is left", h, r)
			}
		}
		if !ex.Expanded {
			t.Fatalf("source %s: expand=true answered expanded false", h)
		}
	}
	zero := strings.Repeat("0", 64)
	f.get("/sources/"+zero, http.StatusNotFound)
	f.get("/sources/"+zero+"/closure", http.StatusNotFound)
	for _, bad := range []string{"/sources/xyz", "/sources/" + zero + "?expand=maybe", "/sources/" + zero + "?other=1"} {
		f.get(bad, http.StatusBadRequest)
	}
}

// checkRuntimeSources asks the view for every revealed source: the
// Runtime's shapes, checked against its golden document by rtGet.
func (f *fixture) checkRuntimeSources(contracts []contractJSON) {
	t := f.t
	srcs, _ := f.revealedSources(contracts)
	for h, want := range srcs {
		var got json.RawMessage
		f.rtGet("/contracts/sources/"+h, nil, http.StatusOK).decode(t, &got)
		if !jsonEqual(got, want) {
			t.Fatalf("/runtime/contracts/sources/%s: %s, want %s", h, got, want)
		}
		var adj, cl rtIDs
		f.rtGet("/contracts/sources/"+h+"/adjacency", nil, http.StatusOK).decode(t, &adj)
		f.rtGet("/contracts/sources/"+h+"/closure", nil, http.StatusOK).decode(t, &cl)
		var native sourceJSON
		f.get("/sources/"+h, http.StatusOK).decode(t, &native)
		var nativeCl closureJSON
		f.get("/sources/"+h+"/closure", http.StatusOK).decode(t, &nativeCl)
		if !slices.Equal(adj.Results, native.Adjacency) || !slices.Equal(adj.Unrevealed, native.Unrevealed) ||
			!slices.Equal(cl.Results, nativeCl.Closure) || !slices.Equal(cl.Unrevealed, nativeCl.Unrevealed) {
			t.Fatalf("source %s: the view's adjacency %+v and closure %+v differ from the native ones", h, adj, cl)
		}
		// The SDK's getContractClosure: every id of the closure answers.
		for _, r := range cl.Results {
			f.rtGet("/contracts/sources/"+r, nil, http.StatusOK)
		}
		for _, r := range cl.Unrevealed {
			f.rtGet("/contracts/sources/"+r, nil, http.StatusNotFound)
		}
		for _, q := range []string{"?expand", "?expand=true"} {
			var ex json.RawMessage
			f.rtGet("/contracts/sources/"+h+q, nil, http.StatusOK).decode(t, &ex)
			var nativeEx sourceJSON
			f.get("/sources/"+h+"?expand=true", http.StatusOK).decode(t, &nativeEx)
			if !jsonEqual(ex, nativeEx.Contract) {
				t.Fatalf("source %s%s: the view's expansion differs from the native one", h, q)
			}
		}
	}
	zero := strings.Repeat("0", 64)
	for _, p := range []string{"", "/adjacency", "/closure"} {
		f.rtGet("/contracts/sources/"+zero+p, nil, http.StatusNotFound)
	}
	f.rtGet("/contracts/sources/nothex", nil, http.StatusBadRequest)
	f.rtGet("/contracts/sources/"+zero+"?expand=maybe", nil, http.StatusBadRequest)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
