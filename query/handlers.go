package query

import (
	"context"
	"net/http"
	"strconv"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// listed is a list request: its parameters, and the request, whose URL the
// next page's link repeats.
type listed[P any] struct {
	p P
	r *http.Request
	q *api.Query
}

// listOf answers a list: a request that takes the parameters allow names
// (and minSeq), read by params, answered by read.
func listOf[P any](s *Server, allow []string, params func(r *http.Request, q *api.Query) (P, error),
	read func(ctx context.Context, l *listed[P]) (api.Answer, error)) http.HandlerFunc {
	return handle(s, func(r *http.Request, q *api.Query) (*listed[P], error) {
		if err := q.Allow(allow...); err != nil {
			return nil, err
		}
		p, err := params(r, q)
		return &listed[P]{p, r, q}, err
	}, read)
}

// listAnswer encodes a page in the envelope; next is the next page's
// cursor ("" on the last page).
func (s *Server) listAnswer(l *http.Request, q *api.Query, at contractstore.Position, results any, next string) (api.Answer, error) {
	env := envelope{Results: results, Seq: at.Seq, Block: at.Block, NodeTip: tipOf(s.cfg.Status().NodeTip)}
	if next != "" {
		env.Cursor, env.Next = &next, nextLink(l, q, next)
	}
	return api.JSONAnswer(at, env)
}

// listPage answers a page of items in the envelope, each as view shows it;
// when more follow, cursor is the next page's cursor, after the last item.
func listPage[P, V, J any](s *Server, l *listed[P], at contractstore.Position, items []V, more bool,
	view func(*V) J, cursor func(last *V) string) (api.Answer, error) {
	var next string
	if more && len(items) > 0 {
		next = cursor(&items[len(items)-1])
	}
	return s.listAnswer(l.r, l.q, at, api.Map(items, view), next)
}

func (s *Server) contractList() http.HandlerFunc {
	allow := []string{"contractId", "roleCurrency", "tag", "partyAddress", "partyRole", "status", "order", "limit", "cursor"}
	return listOf(s, allow, func(_ *http.Request, q *api.Query) (*contractstore.ContractListParams, error) {
		return contractListParams(q)
	}, func(ctx context.Context, l *listed[*contractstore.ContractListParams]) (api.Answer, error) {
		page, err := s.cfg.Contracts.ContractList(ctx, l.p)
		if err != nil {
			return api.Answer{}, err
		}
		var next, cursor *string
		if page.More {
			kind := cursorContractsAsc
			if l.p.Descending {
				kind = cursorContractsDesc
			}
			c := encodeCursor(kind, strconv.FormatInt(page.Contracts[len(page.Contracts)-1].Seq, 10))
			cursor, next = &c, nextLink(l.r, l.q, c)
		}
		bp, release := api.Buffer()
		*bp = appendContractPage(*bp, page, next, cursor, s.cfg.Status().NodeTip)
		return api.Answer{At: page.At, Body: *bp, Release: release}, nil
	})
}

// byPath parses a request that names its resource by one path value and
// takes no parameter but minSeq.
func byPath[K any](name string, parse func(string) (K, error)) func(*http.Request, *api.Query) (K, error) {
	return func(r *http.Request, q *api.Query) (K, error) {
		if err := q.Allow(); err != nil {
			var none K
			return none, err
		}
		return parse(r.PathValue(name))
	}
}

// refOf parses an output reference, its errors naming it as what.
func refOf(what string) func(string) (chain.TxOutRef, error) {
	return func(v string) (chain.TxOutRef, error) { return api.ParseRef(what, v) }
}

// getOne answers one resource: parse names it, get reads it, an unknown
// one is what(key) not found, and view is its JSON.
func getOne[K, V, J any](s *Server, parse func(*http.Request, *api.Query) (K, error),
	get func(context.Context, K) (V, contractstore.Position, error), what func(K) string, view func(V) J) http.HandlerFunc {
	return handle(s, parse, func(ctx context.Context, key K) (api.Answer, error) {
		v, at, err := get(ctx, key)
		if err != nil {
			return api.Answer{At: at}, api.NotFound(err, what(key))
		}
		return api.JSONAnswer(at, view(v))
	})
}

// contractGet answers a contract, from the cache when it has it.
func (s *Server) contractGet() http.HandlerFunc {
	return handle(s, byPath("contractId", refOf("contract_id")), func(ctx context.Context, id chain.TxOutRef) (api.Answer, error) {
		if cache := s.cfg.Cache; cache != nil {
			applied := s.cfg.Projection.Applied()
			if body, at, ok := cache.get(id); ok {
				if applied.Seq > at.Seq {
					at = applied
				}
				return api.Answer{At: at, Body: body}, nil
			}
		}
		c, at, err := s.cfg.Contracts.ContractGet(ctx, id)
		if err != nil {
			return api.Answer{At: at}, api.NotFound(err, "contract "+id.String())
		}
		a, err := api.JSONAnswer(at, contractOf(c))
		if err == nil && s.cfg.Cache != nil {
			s.cfg.Cache.put(id, a.Body, at)
		}
		return a, err
	})
}

func (s *Server) transactionList() http.HandlerFunc {
	return listOf(s, []string{"limit", "cursor"}, func(r *http.Request, q *api.Query) (*contractstore.TransactionListParams, error) {
		p := &contractstore.TransactionListParams{}
		var err error
		if p.Contract, err = api.ParseRef("contract_id", r.PathValue("contractId")); err != nil {
			return nil, err
		}
		if p.Limit, err = q.Limit(); err != nil {
			return nil, err
		}
		p.After, err = cursorAfter(q, cursorTransactions)
		return p, err
	}, func(ctx context.Context, l *listed[*contractstore.TransactionListParams]) (api.Answer, error) {
		page, err := s.cfg.Contracts.TransactionList(ctx, l.p)
		if err != nil {
			var at contractstore.Position
			if page != nil {
				at = page.At
			}
			return api.Answer{At: at}, api.NotFound(err, "contract "+l.p.Contract.String())
		}
		return listPage(s, l, page.At, page.Transactions, page.More, transactionHeaderOf, func(last *contractstore.Transaction) string {
			return encodeCursor(cursorTransactions, strconv.FormatInt(last.Seq, 10))
		})
	})
}

// stepRef names a step: its contract and transaction.
type stepRef struct {
	contract chain.TxOutRef
	tx       chain.Hash32
}

func (s *Server) transactionGet() http.HandlerFunc {
	return getOne(s, func(r *http.Request, q *api.Query) (stepRef, error) {
		id, err := byPath("contractId", refOf("contract_id"))(r, q)
		if err != nil {
			return stepRef{}, err
		}
		tx, err := api.ParseTxID(r.PathValue("txId"))
		return stepRef{id, tx}, err
	}, func(ctx context.Context, ref stepRef) (*contractstore.Transaction, contractstore.Position, error) {
		return s.cfg.Contracts.TransactionGet(ctx, ref.contract, ref.tx)
	}, func(ref stepRef) string {
		return "transaction " + ref.tx.String() + " of contract " + ref.contract.String()
	}, transactionOf)
}

// transactionOfTx answers the step a transaction made, of whichever
// contract (a search by transaction id alone: the explorer's search box).
func (s *Server) transactionOfTx() http.HandlerFunc {
	return getOne(s, byPath("txId", api.ParseTxID), s.cfg.Contracts.TransactionOfTx,
		func(tx chain.Hash32) string { return "step of transaction " + tx.String() }, transactionOf)
}

// contractNext answers /next (api.Next) with the native API's errors.
func (s *Server) contractNext() http.HandlerFunc {
	type request struct {
		id chain.TxOutRef
		nr *api.NextRequest
	}
	return handle(s, func(r *http.Request, q *api.Query) (request, error) {
		if err := q.AllowNext(); err != nil {
			return request{}, err
		}
		id, err := api.ParseRef("contract_id", r.PathValue("contractId"))
		if err != nil {
			return request{}, err
		}
		nr, err := api.ParseNext(q)
		return request{id, nr}, err
	}, func(ctx context.Context, req request) (api.Answer, error) {
		body, at, err := api.Next(ctx, s.cfg.Contracts, req.id, req.nr)
		switch {
		case err == api.ErrContractClosed:
			err = &httpError{http.StatusNotFound, "contract_closed", "contract " + req.id.String() + " is closed: nothing can be applied"}
		case err != nil:
			err = api.NotFound(err, "contract "+req.id.String())
		}
		return api.Answer{At: at, Body: body}, err
	})
}
