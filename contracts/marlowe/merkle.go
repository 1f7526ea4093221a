package marlowe

import (
	"bytes"
	"slices"
)

// MerkleizedHashes returns the continuation hashes of the merkleized cases
// a contract holds (the Marlowe Runtime's adjacency of a contract source:
// the sources it references directly), each once, in ascending order.
func MerkleizedHashes(ct Contract) [][]byte {
	var out [][]byte
	walkCases(ct, func(cs *Case) {
		if cs.Merkleized() {
			out = append(out, cs.MerkleizedThen)
		}
	})
	slices.SortFunc(out, bytes.Compare)
	return slices.CompactFunc(out, bytes.Equal)
}

// walkCases calls fn on every case of every When in ct (iteratively: a
// contract from the chain may be deep).
func walkCases(ct Contract, fn func(*Case)) {
	stack := []Contract{ct}
	for len(stack) > 0 {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch x := c.(type) {
		case *Pay:
			stack = append(stack, x.Then)
		case *If:
			stack = append(stack, x.Then, x.Else)
		case *Let:
			stack = append(stack, x.Then)
		case *Assert:
			stack = append(stack, x.Then)
		case *When:
			stack = append(stack, x.TimeoutContinuation)
			for i := range x.Cases {
				fn(&x.Cases[i])
				if x.Cases[i].Then != nil {
					stack = append(stack, x.Cases[i].Then)
				}
			}
		}
	}
}

// Demerkleize returns ct with every merkleized case whose continuation
// lookup knows replaced by that continuation, itself demerkleized (the
// Marlowe Runtime's expanded contract source); cases lookup does not know
// stay merkleized. ct is not changed; continuations met twice are shared.
// A continuation can be referenced many times, so the expanded tree can be
// exponentially larger than its parts: ok is false when it would have more
// than maxNodes contract nodes.
func Demerkleize(ct Contract, lookup func(hash []byte) (Contract, bool), maxNodes int64) (out Contract, ok bool) {
	type expanded struct {
		c     Contract
		nodes int64
	}
	done := map[string]expanded{}
	over := false
	var expand func(c Contract) (Contract, int64)
	expand = func(c Contract) (Contract, int64) {
		if over {
			return c, 0
		}
		var n int64 = 1
		add := func(sub Contract) Contract {
			e, k := expand(sub)
			n += k
			if n > maxNodes {
				over = true
			}
			return e
		}
		y := MapContinuations(c, add)
		w, ok := y.(*When)
		if !ok {
			return y, n
		}
		for i, cs := range w.Cases {
			if !cs.Merkleized() {
				continue
			}
			key := string(cs.MerkleizedThen)
			e, seen := done[key]
			if !seen {
				cont, known := lookup(cs.MerkleizedThen)
				if !known {
					continue
				}
				e.c, e.nodes = expand(cont)
				done[key] = e
			}
			if n += e.nodes; n > maxNodes {
				over = true
			}
			w.Cases[i] = Case{Action: cs.Action, Then: e.c}
		}
		return w, n
	}
	out, _ = expand(ct)
	return out, !over
}
