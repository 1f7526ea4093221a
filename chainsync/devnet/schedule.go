package devnet

import (
	"math/big"
	"slices"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/marlowe"
)

// On the devnet's own clock (GeneratorConfig.Clock zero) the lifecycles are
// played at the reference traces' times: arbitrary milliseconds, often 0,
// made exact on chain by 1 ms slots, whatever the slot of the block a step
// lands in. On any other clock (a public network's, 1 s slots) that cannot
// work: a trace's single-millisecond intervals have no slot, and its times
// (1970, 2023) are not the chain's. There each contract's lifecycle is
// scheduled when the contract is created:
//
//   - The distinct times of the lifecycle (the contract's timeouts, the
//     initial minTime, every step's interval ends) keep their order and are
//     moved to consecutive slot ranges from the creation block's slot on:
//     a time some step's interval starts or ends at gets a range of
//     GeneratorConfig.stepWindow slots, any other time one slot.
//   - A timeout becomes the start of its range's first slot; a step's
//     interval [from, to] becomes [start of from's first slot, end of to's
//     last slot]. Every comparison the semantics make between an interval
//     and a timeout or minTime therefore comes out as in the trace.
//   - The steps are then recomputed with the Marlowe semantics on the moved
//     intervals (values of TimeIntervalStart/End change, and so may what
//     they pay). A step the semantics refuse, and every step after it, is
//     dropped: the contract then stays open, abandoned.
//   - A step's validity interval becomes its window: it is put only in a
//     block whose slot lies in it (Generator.dueContract), so that every
//     Marlowe transaction is valid at the slot of its block, as a ledger
//     requires. A contract whose window passed before the generator got to
//     it is abandoned as well (Generator stats).

// stepWindow is when the block holding a step may come: from slot
// notBefore to slot deadline, both included. deadline also respects every
// later step's window.
type stepWindow struct {
	notBefore, deadline uint64
}

// scheduleLifecycle returns a copy of lc moved onto clock for a contract
// created in the block at slot created, with windows of width slots for
// the times steps happen at.
func scheduleLifecycle(lc *Lifecycle, clock chain.SlotConfig, created, width uint64) *Lifecycle {
	type span struct{ first, last uint64 }
	used := map[string]bool{} // times some step's interval starts or ends at
	var times []*big.Int
	add := func(t *big.Int) {
		if t != nil {
			times = append(times, t)
		}
	}
	for i := range lc.Steps {
		iv := lc.Steps[i].Input.Interval
		add(iv.From)
		add(iv.To)
		used[iv.From.String()], used[iv.To.String()] = true, true
	}
	add(lc.State.MinTime)
	walkTimeouts(lc.Contract, add)
	slices.SortFunc(times, func(a, b *big.Int) int { return a.Cmp(b) })
	times = slices.CompactFunc(times, func(a, b *big.Int) bool { return a.Cmp(b) == 0 })
	spans := make(map[string]span, len(times))
	next := created
	for _, t := range times {
		w := uint64(1)
		if used[t.String()] {
			w = max(width, 1)
		}
		spans[t.String()] = span{next, next + w - 1}
		next += w
	}
	start := func(t *big.Int) *big.Int { return big.NewInt(clock.SlotStart(spans[t.String()].first)) }
	end := func(t *big.Int) *big.Int { return big.NewInt(clock.SlotStart(spans[t.String()].last+1) - 1) }

	out := &Lifecycle{Name: lc.Name, Contract: moveTimeouts(lc.Contract, start), State: lc.State}
	if lc.State.MinTime != nil {
		out.State.MinTime = start(lc.State.MinTime)
	}
	st, c := out.State, out.Contract
	for i := range lc.Steps {
		s := &lc.Steps[i]
		in := marlowe.TransactionInput{
			Interval: marlowe.TimeInterval{From: start(s.Input.Interval.From), To: end(s.Input.Interval.To)},
			Inputs:   s.Input.Inputs,
		}
		res, err := marlowe.ComputeTransaction(in, st, c)
		if err != nil {
			break // the rest of the lifecycle is not played
		}
		step := LifecycleStep{Input: in, Contract: res.Contract, State: res.State}
		for _, p := range res.Payments {
			step.Payments = append(step.Payments, Payment(p))
		}
		out.Steps = append(out.Steps, step)
		out.windows = append(out.windows, stepWindow{
			notBefore: spans[s.Input.Interval.From.String()].first,
			deadline:  spans[s.Input.Interval.To.String()].last,
		})
		st, c = res.State, res.Contract
		if _, closed := c.(*marlowe.Close); closed {
			break
		}
	}
	for i := len(out.windows) - 2; i >= 0; i-- {
		out.windows[i].deadline = min(out.windows[i].deadline, out.windows[i+1].deadline)
	}
	return out
}

// walkTimeouts calls f with the timeout of every When in c.
func walkTimeouts(c marlowe.Contract, f func(*big.Int)) {
	switch x := c.(type) {
	case *marlowe.Pay:
		walkTimeouts(x.Then, f)
	case *marlowe.If:
		walkTimeouts(x.Then, f)
		walkTimeouts(x.Else, f)
	case *marlowe.Let:
		walkTimeouts(x.Then, f)
	case *marlowe.Assert:
		walkTimeouts(x.Then, f)
	case *marlowe.When:
		f(x.Timeout)
		for _, cs := range x.Cases {
			if cs.Then != nil {
				walkTimeouts(cs.Then, f)
			}
		}
		walkTimeouts(x.TimeoutContinuation, f)
	}
}

// moveTimeouts returns a copy of c with every When's timeout t replaced by
// to(t); the rest is shared with c.
func moveTimeouts(c marlowe.Contract, to func(*big.Int) *big.Int) marlowe.Contract {
	y := marlowe.MapContinuations(c, func(k marlowe.Contract) marlowe.Contract { return moveTimeouts(k, to) })
	if w, ok := y.(*marlowe.When); ok {
		w.Timeout = to(w.Timeout)
	}
	return y
}
