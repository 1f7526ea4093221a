package query

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/api"
)

func (s *Server) payoutList() http.HandlerFunc {
	allow := []string{"contractId", "roleToken", "status", "limit", "cursor"}
	return listOf(s, allow, func(_ *http.Request, q *api.Query) (*contractstore.PayoutListParams, error) {
		return payoutListParams(q)
	}, func(ctx context.Context, l *listed[*contractstore.PayoutListParams]) (api.Answer, error) {
		page, err := s.cfg.Contracts.PayoutList(ctx, l.p)
		if err != nil {
			return api.Answer{}, err
		}
		return listPage(s, l, page.At, page.Payouts, page.More, payoutOf, func(last *contractstore.Payout) string {
			return encodeCursor(cursorPayouts, strconv.FormatInt(last.Seq, 10), last.ID.TxID.String(),
				strconv.FormatUint(uint64(last.ID.Index), 10))
		})
	})
}

func payoutListParams(q *api.Query) (*contractstore.PayoutListParams, error) {
	p := &contractstore.PayoutListParams{}
	var err error
	if p.Limit, err = q.Limit(); err != nil {
		return nil, err
	}
	if p.Contracts, err = contractIDs(q); err != nil {
		return nil, err
	}
	if p.Roles, err = api.Values(q, "roleToken", api.ParseRole); err != nil {
		return nil, err
	}
	status, err := q.One("status")
	if err != nil {
		return nil, err
	}
	switch contractstore.PayoutStatus(status) {
	case "", contractstore.PayoutAvailable, contractstore.PayoutWithdrawn, contractstore.PayoutPaid:
		p.Status = contractstore.PayoutStatus(status)
	default:
		return nil, api.Bad("bad_status", fmt.Sprintf("status %q: want available, withdrawn or paid", api.Clip(status)))
	}
	parts, err := cursorParam(q, cursorPayouts)
	if err != nil || parts == nil {
		return p, err
	}
	seq, err1 := strconv.ParseInt(parts[0], 10, 64)
	ref, err2 := chain.ParseTxOutRef(parts[1] + "#" + parts[2])
	if err1 != nil || err2 != nil || seq < 0 {
		return nil, errBadCursor
	}
	p.After = &contractstore.PayoutKey{Seq: seq, ID: ref}
	return p, nil
}

// contractIDs reads the repeatable contractId parameter.
func contractIDs(q *api.Query) ([]chain.TxOutRef, error) {
	return api.Values(q, "contractId", refOf("contract_id"))
}

func (s *Server) payoutGet() http.HandlerFunc {
	return getOne(s, byPath("payoutId", refOf("payout_id")), s.cfg.Contracts.PayoutGet,
		func(id chain.TxOutRef) string { return "payout " + id.String() }, payoutOf)
}

func (s *Server) withdrawalList() http.HandlerFunc {
	return listOf(s, []string{"contractId", "limit", "cursor"}, func(_ *http.Request, q *api.Query) (*contractstore.WithdrawalListParams, error) {
		p := &contractstore.WithdrawalListParams{}
		var err error
		if p.Limit, err = q.Limit(); err != nil {
			return nil, err
		}
		if p.Contracts, err = contractIDs(q); err != nil {
			return nil, err
		}
		p.After, err = cursorAfter(q, cursorWithdrawals)
		return p, err
	}, func(ctx context.Context, l *listed[*contractstore.WithdrawalListParams]) (api.Answer, error) {
		page, err := s.cfg.Contracts.WithdrawalList(ctx, l.p)
		if err != nil {
			return api.Answer{}, err
		}
		return listPage(s, l, page.At, page.Withdrawals, page.More, withdrawalOf, func(last *contractstore.Withdrawal) string {
			return encodeCursor(cursorWithdrawals, strconv.FormatInt(last.LastSeq, 10))
		})
	})
}

func (s *Server) withdrawalGet() http.HandlerFunc {
	return getOne(s, byPath("txId", api.ParseTxID), s.cfg.Contracts.WithdrawalGet,
		func(tx chain.Hash32) string { return "withdrawal " + tx.String() }, withdrawalOf)
}
