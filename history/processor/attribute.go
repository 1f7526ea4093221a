package processor

import (
	"encoding/hex"
	"math/big"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/contracts/marlowe"
)

// Payments to a party are ordinary outputs (to an address) or outputs to
// the payout validator (to a role), and the Marlowe validator checks them
// per payee, not per payment: the outputs to an address together must hold
// at least the total paid to it, and some one output to the payout
// validator with a role's datum must hold at least the total paid to the
// role. So one output may carry several payments to its payee (wallets and
// the Runtime's builder pay each payee's total in one output), an address
// payee may be paid in several outputs, and an output to an address may
// hold more than its payments (change, or the minimum ada beside tokens).
//
// attribute finds, for one payee, which of the outputs to it carries each
// payment: it assigns every payment whole to one output so that each
// output holds at least the payments assigned to it. Among the assignments
// that do, it takes the one with the most outputs holding exactly their
// payments (an output holding more also carries change), and of those the
// first in the order payments and outputs come (so payments made one output
// each, in order, keep their outputs). The search is bounded; should no
// assignment of whole payments fit (a payment split over outputs, which the
// validator allows for addresses but no builder does), each payment goes to
// the first output that still holds it, else to the one that holds the most
// of its token.

// holding is a value by asset: quantity by asset key.
type holding map[string]*big.Int

// share is one payment as attribute sees it: one asset's quantity.
type share struct {
	asset string
	q     *big.Int
}

// assetKey names an asset: "" for ada, else policy and name in hex.
func assetKey(policy, name []byte) string {
	if len(policy) == 0 && len(name) == 0 {
		return ""
	}
	return hex.EncodeToString(policy) + "." + hex.EncodeToString(name)
}

// holdingOf is a ledger value as a holding.
func holdingOf(v block.Value) holding {
	h := holding{"": new(big.Int).SetUint64(v.Lovelace)}
	for _, a := range v.Assets {
		k := assetKey(a.Policy[:], a.Name)
		if h[k] == nil {
			h[k] = new(big.Int)
		}
		h[k].Add(h[k], new(big.Int).SetUint64(a.Quantity))
	}
	return h
}

// shareOf is a payment as a share.
func shareOf(p *marlowe.Payment) share {
	return share{asset: assetKey(p.Token.Currency, p.Token.Name), q: p.Amount}
}

// searchBudget bounds the assignments attribute tries for one payee.
const searchBudget = 1 << 15

// attribute returns, for each payment, the index of the output carrying it,
// or -1 when no output does. Payments of zero (the semantics make them when
// an account is empty; the validator ignores them) go with the payee's
// first output that carries a payment, else nowhere.
func attribute(pays []share, outs []holding) []int {
	res := make([]int, len(pays))
	for i := range res {
		res[i] = -1
	}
	if len(outs) == 0 {
		return res
	}
	var pos []int // the positive payments
	for i, p := range pays {
		if p.q.Sign() > 0 {
			pos = append(pos, i)
		}
	}
	s := &search{outs: outs, budget: searchBudget, bestExact: -1}
	for _, i := range pos {
		s.pays = append(s.pays, pays[i])
	}
	var got []int
	if len(s.pays) > 0 {
		s.start()
		got = s.best
		if got == nil {
			got = greedy(s.pays, outs)
		}
	}
	first := -1
	for k, i := range pos {
		res[i] = got[k]
		if got[k] >= 0 && (first < 0 || got[k] < first) {
			first = got[k]
		}
	}
	for i, p := range pays {
		if p.q.Sign() <= 0 {
			res[i] = first
		}
	}
	return res
}

// search is a depth-first search over the assignments of whole payments to
// outputs, in order: payment 0's output first.
type search struct {
	pays      []share
	outs      []holding
	rem       []holding // what each output holds besides its assigned payments
	used      []int     // payments assigned to each output
	cur       []int
	best      []int
	bestExact int
	bound     int // no assignment has more exact outputs
	budget    int
}

func (s *search) start() {
	s.rem = make([]holding, len(s.outs))
	s.used = make([]int, len(s.outs))
	for o, h := range s.outs {
		s.rem[o] = holding{}
		for k, q := range h {
			s.rem[o][k] = new(big.Int).Set(q)
		}
	}
	s.cur = make([]int, len(s.pays))
	// An output can only hold exactly its payments if it holds no more than
	// all of them together.
	total := holding{}
	for _, p := range s.pays {
		if total[p.asset] == nil {
			total[p.asset] = new(big.Int)
		}
		total[p.asset].Add(total[p.asset], p.q)
	}
	for _, h := range s.outs {
		if covers(total, h) {
			s.bound++
		}
	}
	s.bound = min(s.bound, len(s.pays))
	s.dfs(0)
}

// dfs assigns payment i and the ones after it; true stops the search.
func (s *search) dfs(i int) bool {
	s.budget--
	if s.budget < 0 {
		return true
	}
	if i == len(s.pays) {
		exact := 0
		for o := range s.outs {
			if s.used[o] > 0 && empty(s.rem[o]) {
				exact++
			}
		}
		if exact > s.bestExact {
			s.bestExact, s.best = exact, append(s.best[:0:0], s.cur...)
		}
		return s.bestExact >= s.bound
	}
	p := s.pays[i]
	for o := range s.outs {
		r := s.rem[o][p.asset]
		if r == nil || r.Cmp(p.q) < 0 || s.twin(o) {
			continue
		}
		r.Sub(r, p.q)
		s.used[o]++
		s.cur[i] = o
		stop := s.dfs(i + 1)
		r.Add(r, p.q)
		s.used[o]--
		if stop {
			return true
		}
	}
	return false
}

// twin reports whether an earlier output is interchangeable with output o:
// both without payments yet and of the same value. Assigning to o instead
// would only repeat an earlier assignment.
func (s *search) twin(o int) bool {
	if s.used[o] > 0 {
		return false
	}
	for e := range o {
		if s.used[e] == 0 && equalHolding(s.outs[e], s.outs[o]) {
			return true
		}
	}
	return false
}

// greedy assigns each payment to the first output still holding it, else to
// the output holding most of its token (-1 when none holds any).
func greedy(pays []share, outs []holding) []int {
	rem := make([]holding, len(outs))
	for o, h := range outs {
		rem[o] = holding{}
		for k, q := range h {
			rem[o][k] = new(big.Int).Set(q)
		}
	}
	res := make([]int, len(pays))
	for i, p := range pays {
		res[i] = -1
		most := -1
		for o := range rem {
			r := rem[o][p.asset]
			if r == nil || r.Sign() <= 0 {
				continue
			}
			if r.Cmp(p.q) >= 0 {
				res[i] = o
				break
			}
			if most < 0 || r.Cmp(rem[most][p.asset]) > 0 {
				most = o
			}
		}
		if res[i] < 0 {
			res[i] = most
		}
		if o := res[i]; o >= 0 {
			r := rem[o][p.asset]
			r.Sub(r, p.q)
			if r.Sign() < 0 {
				r.SetInt64(0)
			}
		}
	}
	return res
}

// covers reports whether a holds at least b.
func covers(a, b holding) bool {
	for k, q := range b {
		if q.Sign() > 0 && (a[k] == nil || a[k].Cmp(q) < 0) {
			return false
		}
	}
	return true
}

func empty(h holding) bool {
	for _, q := range h {
		if q.Sign() != 0 {
			return false
		}
	}
	return true
}

func equalHolding(a, b holding) bool {
	return covers(a, b) && covers(b, a)
}
