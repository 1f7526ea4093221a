package query_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/actors/pipeline/projectiontest"
	"github.com/marlowe-follower/follower/query"
	"github.com/marlowe-follower/follower/query/internal/apitest"
)

// Checks of the runtime view beyond its routes' shapes: Total-Count,
// minSeq, the /next errors and party forms on both APIs, roleCurrency on
// /withdrawals, the Range refusals, the status headers of refusals, and
// that a page costs the same however deep into its list it is.

// TestRuntimeTotalCount: Total-Count is on every list of the view,
// filtered or not, whatever the Range: the length of the whole list.
func TestRuntimeTotalCount(t *testing.T) {
	for _, backend := range projectiontest.Backends {
		t.Run(backend, func(t *testing.T) {
			f := newFixture(t, backend, 23, 300, withRuntime)
			contracts := keysOf(rtPages(f, "/contracts", "contractId", "contractId;limit 10000", contractKey), contractKey)
			var stepped string
			for _, id := range contracts {
				if len(rtPages(f, "/contracts/"+pathEscape(id)+"/transactions", "transactionId", "", txKey)) > 1 {
					stepped = id
					break
				}
			}
			if stepped == "" {
				t.Fatal("no contract with two steps")
			}
			for _, l := range []struct{ path, field string }{
				{"/contracts", "contractId"}, {"/contracts?tag=devnet", "contractId"},
				{"/contracts?tag=devnet&tag=nothing", "contractId"}, {"/contracts?tag=nothing", "contractId"},
				{"/contracts/" + pathEscape(stepped) + "/transactions", "transactionId"},
				{"/payouts", "payoutId"}, {"/payouts?status=available", "payoutId"}, {"/withdrawals", "withdrawalId"},
			} {
				var n int
				switch l.field {
				case "contractId":
					n = len(rtPages(f, l.path, l.field, l.field+";limit 10000", contractKey))
				case "transactionId":
					n = len(rtPages(f, l.path, l.field, l.field+";limit 10000", txKey))
				case "payoutId":
					n = len(rtPages(f, l.path, l.field, l.field+";limit 10000", payoutKey))
				default:
					n = len(rtPages(f, l.path, l.field, l.field+";limit 10000", withdrawalKey))
				}
				want := strconv.Itoa(n)
				for _, rng := range []string{"", l.field + ";limit 2", l.field + ";limit 0", l.field + ";limit 1;offset 1;order asc"} {
					h := http.Header{}
					if rng != "" {
						h.Set("Range", rng)
					}
					if got := f.rtGet(l.path, h, http.StatusPartialContent).header.Get("Total-Count"); got != want {
						t.Errorf("%s Range %q: Total-Count %q, want %q", l.path, rng, got, want)
					}
				}
			}
		})
	}
}

// TestRuntimeMinSeq: minSeq on the view waits as on the native API: at the
// head it answers at once with the head's position, beyond it (in time)
// it is 503 NotYetApplied with Retry-After and the status headers, and a
// malformed one is the Runtime's 400.
func TestRuntimeMinSeq(t *testing.T) {
	for _, backend := range projectiontest.Backends {
		t.Run(backend, func(t *testing.T) {
			checkRuntimeMinSeq(t, newFixture(t, backend, 24, 60, func(c *query.Config) {
				withRuntime(c)
				c.MinSeqWait = 30 * time.Millisecond
			}))
		})
	}
}

func checkRuntimeMinSeq(t *testing.T, f *fixture) {
	head := f.p.Projection.Applied().Seq
	for _, path := range []string{"/contracts?minSeq=", "/payouts?minSeq=", "/withdrawals?minSeq="} {
		a := f.rtGet(path+strconv.FormatInt(head, 10), nil, http.StatusPartialContent)
		if a.header.Get(query.HeaderSeq) != strconv.FormatInt(head, 10) {
			t.Fatalf("%s%d: X-Marlowe-Seq %s", path, head, a.header.Get(query.HeaderSeq))
		}
	}
	a := f.rtGet("/contracts?minSeq="+strconv.FormatInt(head+1_000_000, 10), nil, http.StatusServiceUnavailable)
	var e struct{ ErrorCode string }
	a.decode(t, &e)
	if e.ErrorCode != "NotYetApplied" || a.header.Get("Retry-After") == "" {
		t.Fatalf("errorCode %q, Retry-After %q", e.ErrorCode, a.header.Get("Retry-After"))
	}
	for _, v := range []string{"-1", "1e3", "x"} {
		a := f.rtGet("/contracts?minSeq="+v, nil, http.StatusBadRequest)
		a.decode(t, &e)
		if e.ErrorCode != "BadRequest" {
			t.Fatalf("minSeq=%s: errorCode %q", v, e.ErrorCode)
		}
	}
	f.rtGet("/contracts?minSeq=1&minSeq=2", nil, http.StatusBadRequest)
}

// TestRuntimeNextErrors: the Runtime's /next errors, table by table, on an
// open and a closed contract, and the SDK's party form on the native API.
func TestRuntimeNextErrors(t *testing.T) {
	for _, backend := range projectiontest.Backends {
		t.Run(backend, func(t *testing.T) {
			f := newFixture(t, backend, 25, 400, withRuntime)
			native, _ := pages[contractJSON](f, "/contracts?limit=1000")
			// An open contract that names an address party, and a closed one.
			var open, closed *contractJSON
			var addr string
			for i := range native {
				c := &native[i]
				if c.Status == "closed" && closed == nil {
					closed = c
				}
				if c.Status == "open" && open == nil {
					if a := addressParty(t, f, c); a != "" {
						f.get("/contracts/"+pathEscape(c.ContractID), http.StatusOK).decode(t, c)
						open, addr = c, a
					}
				}
			}
			if open == nil || closed == nil {
				t.Fatalf("want an open contract with an address party and a closed contract among %d", len(native))
			}
			var st struct {
				MinTime int64 `json:"minTime"`
			}
			must(t, json.Unmarshal(open.State, &st))
			iso := func(ms int64) string { return url.QueryEscape(time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)) }
			at := "validityStart=" + iso(st.MinTime) + "&validityEnd=" + iso(st.MinTime)
			openID, closedID := pathEscape(open.ContractID), pathEscape(closed.ContractID)
			for _, c := range []struct {
				path, code string
				status     int
			}{
				{"/contracts/" + openID + "/next?validityStart=" + iso(st.MinTime+60_000) + "&validityEnd=" + iso(st.MinTime), "invalidInterval", http.StatusBadRequest},
				{"/contracts/" + openID + "/next?validityStart=" + iso(st.MinTime-120_000) + "&validityEnd=" + iso(st.MinTime-60_000), "invalidInterval", http.StatusBadRequest},
				{"/contracts/" + closedID + "/next?" + at, "contractClosed", http.StatusNotFound},
				{"/contracts/" + strings.Repeat("ab", 32) + "%230/next?" + at, "contractNotFound", http.StatusNotFound},
				{"/contracts/nothex/next?" + at, "BadRequest", http.StatusBadRequest},
				{"/contracts/" + openID + "/next?validityStart=" + iso(st.MinTime), "BadRequest", http.StatusBadRequest},
				{"/contracts/" + openID + "/next?" + at + "&validityEnd=" + iso(st.MinTime), "BadRequest", http.StatusBadRequest},
				{"/contracts/" + openID + "/next?" + at + "&party%5B0%5D%5Baddress%5D=addr_nope", "BadRequest", http.StatusBadRequest},
				{"/contracts/" + openID + "/next?" + at + "&party%5B0%5D%5Brole_token%5D=a&party%5B0%5D%5Brole_token%5D=b", "BadRequest", http.StatusBadRequest},
			} {
				a := f.rtGet(c.path, nil, c.status)
				var e struct {
					ErrorCode string          `json:"errorCode"`
					Details   json.RawMessage `json:"details"`
				}
				a.decode(t, &e)
				if e.ErrorCode != c.code {
					t.Fatalf("GET /runtime%s: errorCode %q, want %q", c.path, e.ErrorCode, c.code)
				}
				if c.code == "invalidInterval" && !bytes.Contains(e.Details, []byte("Interval")) && !bytes.Contains(e.Details, []byte("interval")) {
					t.Fatalf("GET /runtime%s: details %s do not name the interval error", c.path, e.Details)
				}
			}
			// The native API: the same answer in both party forms, its own
			// errors, and unknown parameters refused.
			sdk := "party%5B0%5D%5Brole_token%5D=r&party%5B1%5D%5Baddress%5D=" + url.QueryEscape(addr)
			plain := "party=r&party=" + url.QueryEscape(addr)
			a := f.get("/contracts/"+openID+"/next?"+at+"&"+sdk, http.StatusOK)
			b := f.get("/contracts/"+openID+"/next?"+at+"&"+plain, http.StatusOK)
			v := f.rtGet("/contracts/"+openID+"/next?"+at+"&"+sdk, nil, http.StatusOK)
			if !bytes.Equal(a.body, b.body) || !bytes.Equal(a.body, v.body) {
				t.Fatalf("the party forms differ:\nnative sdk   %s\nnative plain %s\nview sdk     %s", a.body, b.body, v.body)
			}
			for _, c := range []struct {
				q    string
				code string
			}{
				{"&party%5B0%5D%5Bkey%5D=x", "unknown_parameter"},
				{"&whatever=1", "unknown_parameter"},
			} {
				var e struct{ Code string }
				f.get("/contracts/"+openID+"/next?"+at+c.q, http.StatusBadRequest).decode(t, &e)
				if e.Code != c.code {
					t.Fatalf("native /next%s: code %q, want %q", c.q, e.Code, c.code)
				}
			}
			// The view ignores what it does not know, as the Runtime does.
			w := f.rtGet("/contracts/"+openID+"/next?"+at+"&party%5B0%5D%5Bkey%5D=x&whatever=1", nil, http.StatusOK)
			if all := f.rtGet("/contracts/"+openID+"/next?"+at, nil, http.StatusOK); !bytes.Equal(w.body, all.body) {
				t.Fatalf("unknown parameters changed the view's /next:\n%s\n%s", w.body, all.body)
			}
		})
	}
}

// addressParty is an address party the contract's initial contract names,
// or "".
func addressParty(t *testing.T, f *fixture, c *contractJSON) string {
	t.Helper()
	var d struct {
		Resource struct {
			Initial json.RawMessage `json:"initialContract"`
		} `json:"resource"`
	}
	f.rtGet("/contracts/"+pathEscape(c.ContractID), nil, http.StatusOK).decode(t, &d)
	var found string
	var v any
	must(t, json.Unmarshal(d.Resource.Initial, &v))
	apitest.WalkJSON(v, func(x map[string]any) {
		if a, ok := x["address"].(string); ok && len(x) == 1 && found == "" {
			found = a
		}
	})
	return found
}

// TestRuntimeWithdrawalsByRoleCurrency: /withdrawals?roleCurrency= lists
// exactly the withdrawals of a payout under one of the currencies given.
func TestRuntimeWithdrawalsByRoleCurrency(t *testing.T) {
	for _, backend := range projectiontest.Backends {
		t.Run(backend, func(t *testing.T) {
			f := newFixture(t, backend, 26, 500, withRuntime)
			all := rtPages(f, "/withdrawals", "withdrawalId", "withdrawalId;limit 10000", withdrawalKey)
			byCurrency := map[string][]string{} // newest first, as listed
			for _, item := range all {
				var d rtWithdrawal
				f.rtGet("/withdrawals/"+item.Resource.WithdrawalID, nil, http.StatusOK).decode(t, &d)
				var seen []string
				for _, p := range d.Payouts {
					if !slices.Contains(seen, p.Role.PolicyID) {
						seen = append(seen, p.Role.PolicyID)
						byCurrency[p.Role.PolicyID] = append(byCurrency[p.Role.PolicyID], d.WithdrawalID)
					}
				}
			}
			if len(byCurrency) < 2 {
				t.Fatalf("%d withdrawals of %d roles currencies: want two currencies at least", len(all), len(byCurrency))
			}
			var curs []string
			for cur, want := range byCurrency {
				curs = append(curs, cur)
				got := keysOf(rtPages(f, "/withdrawals?roleCurrency="+cur, "withdrawalId", "withdrawalId;limit 2", withdrawalKey), withdrawalKey)
				if !slices.Equal(got, want) {
					t.Fatalf("roleCurrency=%s: %v, want %v", cur, got, want)
				}
			}
			slices.Sort(curs)
			two := curs[:2]
			var want []string
			for _, item := range all {
				id := item.Resource.WithdrawalID
				if slices.Contains(byCurrency[two[0]], id) || slices.Contains(byCurrency[two[1]], id) {
					want = append(want, id)
				}
			}
			got := keysOf(rtPages(f, "/withdrawals?roleCurrency="+two[0]+"&roleCurrency="+two[1], "withdrawalId", "", withdrawalKey), withdrawalKey)
			if !slices.Equal(got, want) {
				t.Fatalf("two currencies: %v, want %v", got, want)
			}
			if got := rtPages(f, "/withdrawals?roleCurrency="+strings.Repeat("0", 56), "withdrawalId", "", withdrawalKey); len(got) != 0 {
				t.Fatalf("an unused currency lists %d withdrawals", len(got))
			}
		})
	}
}
