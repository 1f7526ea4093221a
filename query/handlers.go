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

// listAnswer encodes a page in the envelope; next is the next page's
// cursor ("" on the last page).
func (s *Server) listAnswer(l *http.Request, q *api.Query, at contractstore.Position, results any, next string) (api.Answer, error) {
	env := envelope{Results: results, Seq: at.Seq, Block: at.Block, NodeTip: tipOf(s.cfg.Status().NodeTip)}
	if next != "" {
		env.Cursor, env.Next = &next, nextLink(l, q, next)
	}
	return api.JSONAnswer(at, env)
}

func (s *Server) contractList() http.HandlerFunc {
	return handle(s, func(r *http.Request, q *api.Query) (*listed[*contractstore.ContractListParams], error) {
		if err := q.Allow("contractId", "roleCurrency", "tag", "partyAddress", "partyRole", "status", "order", "limit", "cursor"); err != nil {
			return nil, err
		}
		p, err := contractListParams(q)
		return &listed[*contractstore.ContractListParams]{p, r, q}, err
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

// contractGet answers a contract, from the cache when it has it.
func (s *Server) contractGet() http.HandlerFunc {
	return handle(s, func(r *http.Request, q *api.Query) (chain.TxOutRef, error) {
		if err := q.Allow(); err != nil {
			return chain.TxOutRef{}, err
		}
		return api.ParseRef("contract_id", r.PathValue("contractId"))
	}, func(ctx context.Context, id chain.TxOutRef) (api.Answer, error) {
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
	return handle(s, func(r *http.Request, q *api.Query) (*listed[*contractstore.TransactionListParams], error) {
		if err := q.Allow("limit", "cursor"); err != nil {
			return nil, err
		}
		p := &contractstore.TransactionListParams{}
		var err error
		if p.Contract, err = api.ParseRef("contract_id", r.PathValue("contractId")); err != nil {
			return nil, err
		}
		if p.Limit, err = q.Limit(); err != nil {
			return nil, err
		}
		p.After, err = cursorAfter(q, cursorTransactions)
		return &listed[*contractstore.TransactionListParams]{p, r, q}, err
	}, func(ctx context.Context, l *listed[*contractstore.TransactionListParams]) (api.Answer, error) {
		page, err := s.cfg.Contracts.TransactionList(ctx, l.p)
		if err != nil {
			var at contractstore.Position
			if page != nil {
				at = page.At
			}
			return api.Answer{At: at}, api.NotFound(err, "contract "+l.p.Contract.String())
		}
		results := api.Map(page.Transactions, transactionHeaderOf)
		var next string
		if page.More {
			next = encodeCursor(cursorTransactions, strconv.FormatInt(page.Transactions[len(page.Transactions)-1].Seq, 10))
		}
		return s.listAnswer(l.r, l.q, page.At, results, next)
	})
}

// stepRef names a step: its contract and transaction.
type stepRef struct {
	contract chain.TxOutRef
	tx       chain.Hash32
}

func (s *Server) transactionGet() http.HandlerFunc {
	return handle(s, func(r *http.Request, q *api.Query) (stepRef, error) {
		if err := q.Allow(); err != nil {
			return stepRef{}, err
		}
		id, err := api.ParseRef("contract_id", r.PathValue("contractId"))
		if err != nil {
			return stepRef{}, err
		}
		tx, err := api.ParseTxID(r.PathValue("txId"))
		return stepRef{id, tx}, err
	}, func(ctx context.Context, ref stepRef) (api.Answer, error) {
		t, at, err := s.cfg.Contracts.TransactionGet(ctx, ref.contract, ref.tx)
		if err != nil {
			return api.Answer{At: at}, api.NotFound(err, "transaction "+ref.tx.String()+" of contract "+ref.contract.String())
		}
		return api.JSONAnswer(at, transactionOf(t))
	})
}

// transactionOfTx answers the step a transaction made, of whichever
// contract (a search by transaction id alone: the explorer's search box).
func (s *Server) transactionOfTx() http.HandlerFunc {
	return handle(s, func(r *http.Request, q *api.Query) (chain.Hash32, error) {
		if err := q.Allow(); err != nil {
			return chain.Hash32{}, err
		}
		return api.ParseTxID(r.PathValue("txId"))
	}, func(ctx context.Context, tx chain.Hash32) (api.Answer, error) {
		t, at, err := s.cfg.Contracts.TransactionOfTx(ctx, tx)
		if err != nil {
			return api.Answer{At: at}, api.NotFound(err, "step of transaction "+tx.String())
		}
		return api.JSONAnswer(at, transactionOf(t))
	})
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
