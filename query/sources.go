package query

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// Contract sources on the native API: GET /sources/{sourceId} (the
// contract, its references and where the chain first revealed it) and
// GET /sources/{sourceId}/closure (everything it reaches as far as the
// chain revealed it). The Runtime view has them at
// /runtime/contracts/sources/... in the Runtime's shapes.

type sourceJSON struct {
	SourceID chain.Hash32    `json:"sourceId"`
	Contract json.RawMessage `json:"contract"`
	Expanded bool            `json:"expanded"`
	// Adjacency are the continuation hashes of its merkleized cases;
	// Unrevealed those of them no current record revealed.
	Adjacency  []chain.Hash32   `json:"adjacency"`
	Unrevealed []chain.Hash32   `json:"unrevealed"`
	RevealedBy sourceRevealJSON `json:"revealedBy"`
}

// sourceRevealJSON is the record that first revealed a source: a contract's
// creation (the transaction of its id) or a step of it.
type sourceRevealJSON struct {
	ContractID    chain.TxOutRef `json:"contractId"`
	TransactionID chain.Hash32   `json:"transactionId"`
	Seq           int64          `json:"seq"`
}

type sourceClosureJSON struct {
	SourceID   chain.Hash32   `json:"sourceId"`
	Closure    []chain.Hash32 `json:"closure"`
	Unrevealed []chain.Hash32 `json:"unrevealed"`
}

func (s *Server) sourceGet() http.HandlerFunc {
	type request struct {
		hash   chain.Hash32
		expand bool
	}
	return handle(s, func(r *http.Request, q *api.Query) (request, error) {
		if err := q.Allow("expand"); err != nil {
			return request{}, err
		}
		h, err := api.ParseSourceID(r.PathValue("sourceId"))
		if err != nil {
			return request{}, err
		}
		expand, err := q.ExpandFlag()
		return request{h, expand}, err
	}, func(ctx context.Context, req request) (api.Answer, error) {
		src, at, err := s.cfg.Contracts.SourceGet(ctx, req.hash)
		if err != nil {
			return api.Answer{At: at}, api.NotFound(err, "contract source "+req.hash.String())
		}
		out := sourceJSON{SourceID: src.Hash, Contract: src.Contract, Adjacency: api.Hashes(src.Refs),
			Unrevealed: api.Hashes(src.Unrevealed), RevealedBy: sourceRevealJSON{ContractID: src.Revealed.ContractID,
				TransactionID: src.Revealed.TxID, Seq: src.Revealed.Seq}}
		if req.expand {
			var eat contractstore.Position
			if out.Contract, eat, err = api.ExpandSource(ctx, s.cfg.Contracts, req.hash); err != nil {
				return api.Answer{At: eat}, api.NotFound(err, "contract source "+req.hash.String())
			}
			out.Expanded, at = true, eat
		}
		return api.JSONAnswer(at, out)
	})
}

func (s *Server) sourceClosure() http.HandlerFunc {
	return handle(s, byPath("sourceId", api.ParseSourceID), func(ctx context.Context, h chain.Hash32) (api.Answer, error) {
		cl, at, err := s.cfg.Contracts.SourceClosure(ctx, h, false)
		if err != nil {
			return api.Answer{At: at}, api.NotFound(err, "contract source "+h.String())
		}
		out := sourceClosureJSON{SourceID: h, Closure: []chain.Hash32{}, Unrevealed: api.Hashes(cl.Unrevealed)}
		for _, src := range cl.Sources {
			out.Closure = append(out.Closure, src.Hash)
		}
		return api.JSONAnswer(at, out)
	})
}
