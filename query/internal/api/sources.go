package api

import (
	"context"
	"fmt"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/marlowe"
)

// Contract sources as the chain revealed them (contractstore.Source): both
// APIs answer a source, its references and its closure; both expand a
// source on request (its merkleized cases replaced by their revealed
// continuations, as the Marlowe Runtime's expand does).

// MaxExpandedNodes bounds an expanded source: continuations referenced
// many times make the expansion exponentially larger than its parts.
const MaxExpandedNodes = 100_000

// ParseSourceID reads a contract source id: 64 hex digits (the contract's
// datum hash).
func ParseSourceID(s string) (chain.Hash32, error) {
	h, err := chain.ParseHash32(s)
	if err != nil {
		return h, Bad("bad_source_id", fmt.Sprintf("contract source id %q: want 64 hex digits (a contract's datum hash)", Clip(s)))
	}
	return h, nil
}

// ExpandFlag reads the expand parameter as the Runtime's QueryFlag does
// (present without a value, true or 1: true; false or 0: false); other
// values are refused.
func (q *Query) ExpandFlag() (bool, error) {
	vs, ok := q.V["expand"]
	if !ok {
		return false, nil
	}
	if len(vs) != 1 {
		return false, &BadRequest{Code: "repeated_parameter", Param: "expand", Message: "parameter expand is given more than once"}
	}
	switch vs[0] {
	case "", "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, &BadRequest{Code: "bad_parameter", Param: "expand", Message: fmt.Sprintf("expand %q: want true or false", Clip(vs[0]))}
}

// ExpandSource returns a source's contract with every merkleized case whose
// continuation the chain revealed replaced by it, recursively (the cases
// whose continuations it did not reveal stay merkleized), in core JSON.
func ExpandSource(ctx context.Context, contracts ContractReader, hash chain.Hash32) ([]byte, contractstore.Position, error) {
	cl, at, err := contracts.SourceClosure(ctx, hash, true)
	if err != nil {
		return nil, at, err
	}
	parsed := make(map[chain.Hash32]marlowe.Contract, len(cl.Sources))
	for _, s := range cl.Sources {
		ct, err := marlowe.ParseContractJSON(s.Contract)
		if err != nil {
			return nil, at, fmt.Errorf("source %s: stored contract: %w", s.Hash, err)
		}
		parsed[s.Hash] = ct
	}
	root, ok := parsed[hash]
	if !ok {
		return nil, at, fmt.Errorf("source %s: not in its own closure", hash)
	}
	out, ok := marlowe.Demerkleize(root, func(h []byte) (marlowe.Contract, bool) {
		ct, ok := parsed[chain.Hash32(h)]
		return ct, ok
	}, MaxExpandedNodes)
	if !ok {
		return nil, at, &BadRequest{Code: "expansion_too_large", Param: "expand",
			Message: fmt.Sprintf("source %s expanded has more than %d contract nodes (its continuations are referenced many times); ask for it without expand, and for its closure", hash, MaxExpandedNodes)}
	}
	body, err := marlowe.ContractJSON(out)
	if err != nil {
		return nil, at, err
	}
	return append(body, '\n'), at, nil
}

// Hashes is a list of hashes as answers show it: [] for none.
func Hashes(hs []chain.Hash32) []chain.Hash32 {
	if hs == nil {
		return []chain.Hash32{}
	}
	return hs
}
