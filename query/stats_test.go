package query_test

import (
	"math/big"
	"net/http"
	"net/url"
	"testing"

	"github.com/marlowe-follower/follower/actors/pipeline/projectiontest"
)

// assetsJSON is an assets object with its quantities exact.
type assetsJSON struct {
	Lovelace big.Int                        `json:"lovelace"`
	Tokens   map[string]map[string]*big.Int `json:"tokens"`
}

type statsJSON struct {
	Contracts struct {
		Total int64 `json:"total"`
		Open  int64 `json:"open"`
	} `json:"contracts"`
	ValueLocked      assetsJSON `json:"valueLocked"`
	PayoutsAvailable struct {
		Count  int64      `json:"count"`
		Assets assetsJSON `json:"assets"`
	} `json:"payoutsAvailable"`
	Seq int64 `json:"seq"`
}

// sumOf adds assets up.
func sumOf(all []assetsJSON) map[string]string {
	lovelace := new(big.Int)
	tokens := map[string]*big.Int{}
	for _, a := range all {
		lovelace.Add(lovelace, &a.Lovelace)
		for p, names := range a.Tokens {
			for n, q := range names {
				if tokens[p+"."+n] == nil {
					tokens[p+"."+n] = new(big.Int)
				}
				tokens[p+"."+n].Add(tokens[p+"."+n], q)
			}
		}
	}
	out := map[string]string{"lovelace": lovelace.String()}
	for k, v := range tokens {
		out[k] = v.String()
	}
	return out
}

// checkStats compares GET /stats with what the lists say, added up here:
// every open contract's assets, every available payout's.
func (f *fixture) checkStats() {
	t := f.t
	var st statsJSON
	f.get("/stats", http.StatusOK).decode(t, &st)
	open, first := pages[contractJSON](f, "/contracts?status=open&limit=50")
	all, _ := pages[contractJSON](f, "/contracts?limit=1000")
	if st.Seq != first.Seq || st.Contracts.Open != int64(len(open)) || st.Contracts.Total != int64(len(all)) {
		t.Fatalf("stats: %d contracts, %d open at seq %d; the lists: %d, %d at seq %d", st.Contracts.Total, st.Contracts.Open, st.Seq, len(all), len(open), first.Seq)
	}
	var locked []assetsJSON
	for _, c := range open {
		var full struct {
			Assets assetsJSON `json:"assets"`
		}
		f.get("/contracts/"+url.PathEscape(c.ContractID), http.StatusOK).decode(t, &full)
		locked = append(locked, full.Assets)
	}
	if got, want := sumOf([]assetsJSON{st.ValueLocked}), sumOf(locked); len(open) == 0 || !equalMaps(got, want) {
		t.Fatalf("value locked %v, the open contracts' %v (%d)", got, want, len(open))
	}
	payouts, _ := pages[struct {
		Assets assetsJSON `json:"assets"`
	}](f, "/payouts?status=available&limit=100")
	var paid []assetsJSON
	for _, p := range payouts {
		paid = append(paid, p.Assets)
	}
	if got, want := sumOf([]assetsJSON{st.PayoutsAvailable.Assets}), sumOf(paid); st.PayoutsAvailable.Count != int64(len(payouts)) || !equalMaps(got, want) {
		t.Fatalf("payouts available: %d, %v; the list: %d, %v", st.PayoutsAvailable.Count, got, len(payouts), want)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestStatsFollowTheChain: /stats adds up again as the chain grows, the
// contracts that moved read again (and the others kept), the same answer
// for the same seq.
func TestStatsFollowTheChain(t *testing.T) {
	for _, backend := range projectiontest.Backends {
		t.Run(backend, func(t *testing.T) {
			p := projectiontest.Start(t, projectiontest.Options{Backend: backend, Generator: projectiontest.DefaultGenerator(23), Batch: true})
			p.Advance(100)
			p.Sync()
			f := newFixtureFor(t, p, nil)
			f.checkStats()
			a := f.get("/stats", http.StatusOK)
			b := f.get("/stats", http.StatusOK)
			if string(a.body) != string(b.body) {
				t.Fatal("two answers at the same seq differ")
			}
			for i := 0; i < 2; i++ {
				p.Advance(60)
				p.Sync()
				f.checkStats()
			}
		})
	}
}
