package runtime

import (
	"context"
	"net/http"
	"strings"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// The Runtime's contract sources, as far as the chain revealed them: a
// source is the initial contract of a contract created on chain or the
// continuation of a merkleized case a step revealed, named by its datum
// hash (the Runtime's ContractSourceId). GET .../sources/{id} answers its
// contract (expand: with the revealed continuations in place of its
// merkleized cases), .../adjacency the hashes it references, .../closure
// the revealed sources it reaches; both lists name in unrevealed (an extra
// of the follower's) the referenced hashes no record revealed yet. A hash
// no current record revealed is 404.
//
// Their paths overlap the contracts' ({contractId}/transactions, ...), so
// the mux cannot route them: sources dispatches the view's paths under
// /contracts/sources itself.

// sourcePatterns name the sources' routes (for the request metrics).
var sourcePatterns = map[string]string{
	"":           "GET " + Prefix + "/contracts/sources/{contractSourceId}",
	"adjacency":  "GET " + Prefix + "/contracts/sources/{contractSourceId}/adjacency",
	"closure":    "GET " + Prefix + "/contracts/sources/{contractSourceId}/closure",
	"collection": Prefix + "/contracts/sources",
}

// idsJSON is the Runtime's ContractSourceIds, with the follower's
// unrevealed.
type idsJSON struct {
	Results    []chain.Hash32 `json:"results"`
	Unrevealed []chain.Hash32 `json:"unrevealed"`
}

// sourceHandlers are the sources' handlers, by the path's last part.
func (v *View) sourceHandlers() map[string]http.HandlerFunc {
	parseID := func(r *http.Request) (chain.Hash32, error) {
		h, err := api.ParseSourceID(r.PathValue("contractSourceId"))
		if err != nil {
			return h, invalid("bad_source_id", "Invalid contract source id: "+err.Error())
		}
		return h, nil
	}
	notRevealed := func(err error) error {
		return missing(err, notFound("Contract source not found: no current record of the chain revealed it"))
	}
	type getRequest struct {
		hash   chain.Hash32
		expand bool
	}
	return map[string]http.HandlerFunc{
		"": handle(v, func(r *http.Request, q *api.Query) (getRequest, error) {
			h, err := parseID(r)
			if err != nil {
				return getRequest{}, err
			}
			expand, err := q.ExpandFlag()
			return getRequest{h, expand}, err
		}, func(ctx context.Context, req getRequest) (api.Answer, error) {
			if req.expand {
				body, at, err := api.ExpandSource(ctx, v.env.Contracts, req.hash)
				return api.Answer{At: at, ContentType: jsonContentType, Body: body}, notRevealed(err)
			}
			src, at, err := v.env.Contracts.SourceGet(ctx, req.hash)
			if err != nil {
				return api.Answer{At: at}, notRevealed(err)
			}
			return api.Answer{At: at, ContentType: jsonContentType, Body: append(append([]byte(nil), src.Contract...), '\n')}, nil
		}),
		"adjacency": handle(v, func(r *http.Request, q *api.Query) (chain.Hash32, error) {
			return parseID(r)
		}, func(ctx context.Context, h chain.Hash32) (api.Answer, error) {
			src, at, err := v.env.Contracts.SourceGet(ctx, h)
			if err != nil {
				return api.Answer{At: at}, notRevealed(err)
			}
			return one(at, idsJSON{Results: api.Hashes(src.Refs), Unrevealed: api.Hashes(src.Unrevealed)})
		}),
		"closure": handle(v, func(r *http.Request, q *api.Query) (chain.Hash32, error) {
			return parseID(r)
		}, func(ctx context.Context, h chain.Hash32) (api.Answer, error) {
			cl, at, err := v.env.Contracts.SourceClosure(ctx, h, false)
			if err != nil {
				return api.Answer{At: at}, notRevealed(err)
			}
			out := idsJSON{Results: []chain.Hash32{}, Unrevealed: api.Hashes(cl.Unrevealed)}
			for _, s := range cl.Sources {
				out.Results = append(out.Results, s.Hash)
			}
			return one(at, out)
		}),
	}
}

// sources answers a path under /contracts/sources: rest is what follows
// it. It reports false for a path that is not a source's.
func (v *View) sources(w http.ResponseWriter, r *http.Request, rest string) bool {
	parts := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	if rest == "" || rest == "/" || len(parts) > 2 {
		return false
	}
	sub := ""
	if len(parts) == 2 {
		sub = parts[1]
	}
	h, ok := v.srcHandlers[sub]
	if !ok {
		return false
	}
	r.Pattern = sourcePatterns[sub]
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		v.setHeaders(w, v.env.Projection.Applied())
		v.methodNotAllowed(w, r)
		return true
	}
	r.SetPathValue("contractSourceId", parts[0])
	h(w, r)
	return true
}
