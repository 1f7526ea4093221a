package query

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"sync"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// GET /stats: totals over the projection, for dashboards (the explorer
// shows them): how many contracts and how many open, the value locked in
// the open contracts, and the payouts waiting to be withdrawn (how many,
// their value).
//
// The contract store keeps no sum of values, so the answer is added up
// from what it has: the open contracts' headers are listed (a thousand a
// read) and each one's value is read once per change of its lastSeq and
// kept by contract between answers, so an answer costs a walk over the
// open headers and over the available payouts, plus a read of each
// contract that moved since the last answer. Answers are kept by the
// projection's seq (one walk a seq, one walk at a time: concurrent
// callers share it). The walk reads page after page while the projection
// may move: the answer's seq is the first page's, and a contract that
// moved during the walk is counted as it was read.

const statsPage = 1000

type statsJSON struct {
	Contracts struct {
		Total int64 `json:"total"`
		Open  int64 `json:"open"`
	} `json:"contracts"`
	ValueLocked      record.Assets `json:"valueLocked"`
	PayoutsAvailable struct {
		Count  int64         `json:"count"`
		Assets record.Assets `json:"assets"`
	} `json:"payoutsAvailable"`
	Seq     int64             `json:"seq"`
	Block   chain.BlockHeader `json:"block"`
	NodeTip tipJSON           `json:"nodeTip"`
}

// stats keeps the last answer and each open contract's value.
type stats struct {
	mu     sync.Mutex // one walk at a time
	seq    int64      // the projection's seq of the last answer
	answer *statsJSON
	at     contractstore.Position
	values map[chain.TxOutRef]lockedValue
}

type lockedValue struct {
	lastSeq int64
	assets  record.Assets
}

func (s *Server) stats() http.HandlerFunc {
	return handle(s, func(_ *http.Request, q *api.Query) (struct{}, error) {
		return struct{}{}, q.Allow()
	}, func(ctx context.Context, _ struct{}) (api.Answer, error) {
		answer, at, err := s.statsNow(ctx)
		if err != nil {
			return api.Answer{At: at}, err
		}
		out := *answer
		out.NodeTip = tipOf(s.cfg.Status().NodeTip)
		return api.JSONAnswer(at, &out)
	})
}

// statsNow answers the stats as of the projection's seq now, walking the
// store when it moved since the last answer.
func (s *Server) statsNow(ctx context.Context) (*statsJSON, contractstore.Position, error) {
	st := &s.statsState
	st.mu.Lock()
	defer st.mu.Unlock()
	if applied := s.cfg.Projection.Applied(); st.answer != nil && applied.Seq == st.seq {
		return st.answer, st.at, nil
	}
	seq := s.cfg.Projection.Applied().Seq
	if st.values == nil {
		st.values = map[chain.TxOutRef]lockedValue{}
	}
	out := &statsJSON{}
	locked := newAssetSum()
	open := map[chain.TxOutRef]bool{}
	var at contractstore.Position
	for after, first := int64(0), true; ; first = false {
		page, err := s.cfg.Contracts.ContractList(ctx, &contractstore.ContractListParams{Filter: contractstore.ContractFilter{Status: contractstore.StatusOpen}, After: after, Limit: statsPage})
		if err != nil {
			return nil, at, err
		}
		if first {
			at = page.At
			if page.Total != nil {
				out.Contracts.Open = *page.Total
			}
		}
		for i := range page.Contracts {
			c := &page.Contracts[i]
			open[c.ID] = true
			v, ok := st.values[c.ID]
			if !ok || v.lastSeq != c.LastSeq {
				full, _, err := s.cfg.Contracts.ContractGet(ctx, c.ID)
				if errors.Is(err, contractstore.ErrNotFound) {
					continue // a rollback took it away since the page was read
				}
				if err != nil {
					return nil, at, err
				}
				v = lockedValue{lastSeq: full.LastSeq}
				if full.Body != nil {
					v.assets = full.Body.Assets
				}
				st.values[c.ID] = v
			}
			locked.add(v.assets)
		}
		if !page.More || len(page.Contracts) == 0 {
			break
		}
		after = page.Contracts[len(page.Contracts)-1].Seq
	}
	for id := range st.values {
		if !open[id] {
			delete(st.values, id) // closed (or rolled back) since
		}
	}
	all, err := s.cfg.Contracts.ContractList(ctx, &contractstore.ContractListParams{Limit: 1})
	if err != nil {
		return nil, at, err
	}
	if all.Total != nil {
		out.Contracts.Total = *all.Total
	}
	payouts := newAssetSum()
	var key *contractstore.PayoutKey
	for {
		page, err := s.cfg.Contracts.PayoutList(ctx, &contractstore.PayoutListParams{Status: contractstore.PayoutAvailable, After: key, Limit: statsPage})
		if err != nil {
			return nil, at, err
		}
		for i := range page.Payouts {
			payouts.add(page.Payouts[i].Assets)
			out.PayoutsAvailable.Count++
		}
		if !page.More || len(page.Payouts) == 0 {
			break
		}
		last := page.Payouts[len(page.Payouts)-1]
		key = &contractstore.PayoutKey{Seq: last.Seq, ID: last.ID}
	}
	out.ValueLocked = locked.assets()
	out.PayoutsAvailable.Assets = payouts.assets()
	out.Seq, out.Block = at.Seq, at.Block
	st.answer, st.seq, st.at = out, seq, at
	return out, at, nil
}

// assetSum adds assets exactly (token quantities are unbounded integers).
type assetSum struct {
	lovelace big.Int
	tokens   map[string]map[string]*big.Int
}

func newAssetSum() *assetSum { return &assetSum{tokens: map[string]map[string]*big.Int{}} }

func (a *assetSum) add(v record.Assets) {
	a.lovelace.Add(&a.lovelace, new(big.Int).SetUint64(v.Lovelace))
	for policy, names := range v.Tokens {
		m := a.tokens[policy]
		if m == nil {
			m = map[string]*big.Int{}
			a.tokens[policy] = m
		}
		for name, n := range names {
			x, ok := new(big.Int).SetString(n.String(), 10)
			if !ok {
				continue // (the store writes integers only)
			}
			if m[name] == nil {
				m[name] = new(big.Int)
			}
			m[name].Add(m[name], x)
		}
	}
}

// assets writes the sum as record.Assets; lovelace beyond 2^64 (more than
// all the ada there is) is capped.
func (a *assetSum) assets() record.Assets {
	out := record.Assets{Tokens: map[string]map[string]json.Number{}}
	if a.lovelace.IsUint64() {
		out.Lovelace = a.lovelace.Uint64()
	} else {
		out.Lovelace = ^uint64(0)
	}
	for policy, names := range a.tokens {
		out.Tokens[policy] = map[string]json.Number{}
		for name, n := range names {
			out.Tokens[policy][name] = json.Number(n.String())
		}
	}
	return out
}
