package cvsql

import (
	"context"
	"encoding/json"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
)

// SourceGet reads a source, its references and its first revelation; q
// must be a read transaction.
func SourceGet(ctx context.Context, q Querier, hash chain.Hash32) (*contractstore.SourceInfo, contractstore.Position, error) {
	at, err := position(ctx, q)
	if err != nil {
		return nil, at, err
	}
	h := append([]byte(nil), hash[:]...)
	var contract, id, tx []byte
	var seq int64
	found, err := queryOne(ctx, q, `SELECT s.contract, l.contract_id, l.tx_id, l.seq FROM cv_sources s
		JOIN cv_source_links l ON l.hash = s.hash WHERE s.hash = ? ORDER BY l.seq LIMIT 1`, []any{h}, &contract, &id, &tx, &seq)
	if err != nil {
		return nil, at, err
	}
	if !found {
		return nil, at, contractstore.ErrNotFound
	}
	out := &contractstore.SourceInfo{Source: contractstore.Source{Hash: hash, Contract: json.RawMessage(contract)}}
	out.Revealed = contractstore.SourceLink{Hash: hash, Seq: seq}
	var d decoded
	if out.Revealed.ContractID, out.Revealed.TxID = d.ref(id), d.hash(tx); d.err != nil {
		return nil, at, d.err
	}
	var ref []byte
	var revealed bool
	err = each(ctx, q, `SELECT r.ref, EXISTS (SELECT 1 FROM cv_sources s WHERE s.hash = r.ref) FROM cv_source_refs r
		WHERE r.hash = ? ORDER BY r.ref`, []any{h}, []any{&ref, &revealed}, func() error {
		r, err := HashFrom(ref)
		out.Refs = append(out.Refs, r)
		if !revealed {
			out.Unrevealed = append(out.Unrevealed, r)
		}
		return err
	})
	return out, at, err
}

// SourceClosure reads every hash a source reaches through revealed sources
// (a recursive walk of the references from the source, which must be
// revealed), each marked revealed or not, with the revealed ones' contracts
// when asked; q must be a read transaction.
func SourceClosure(ctx context.Context, q Querier, hash chain.Hash32, withContracts bool) (*contractstore.SourceClosure, contractstore.Position, error) {
	at, err := position(ctx, q)
	if err != nil {
		return nil, at, err
	}
	contract := "NULL"
	if withContracts {
		contract = "s.contract"
	}
	out := &contractstore.SourceClosure{}
	var h, body []byte
	var revealed bool
	err = each(ctx, q, `WITH RECURSIVE reach(hash) AS (
			SELECT s.hash FROM cv_sources s WHERE s.hash = ?
			UNION
			SELECT r.ref FROM cv_source_refs r JOIN reach ON r.hash = reach.hash
		)
		SELECT reach.hash, s.hash IS NOT NULL, `+contract+` FROM reach LEFT JOIN cv_sources s ON s.hash = reach.hash ORDER BY reach.hash`,
		[]any{append([]byte(nil), hash[:]...)}, []any{&h, &revealed, &body}, func() error {
			r, err := HashFrom(h)
			if err != nil {
				return err
			}
			if !revealed {
				out.Unrevealed = append(out.Unrevealed, r)
				return nil
			}
			src := contractstore.Source{Hash: r}
			if withContracts {
				src.Contract = append(json.RawMessage(nil), body...)
			}
			out.Sources = append(out.Sources, src)
			return nil
		})
	if err != nil {
		return nil, at, err
	}
	if len(out.Sources) == 0 {
		return nil, at, contractstore.ErrNotFound
	}
	return out, at, nil
}
