package runtime

import (
	"context"
	"errors"
	"net/http"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// withdrawalListRequest is a withdrawal list's filter and range.
type withdrawalListRequest struct {
	p contractstore.WithdrawalListParams
	ranged[chain.Hash32]
}

func (v *View) withdrawalList() http.HandlerFunc {
	return handle(v, func(r *http.Request, q *api.Query) (*withdrawalListRequest, error) {
		req := &withdrawalListRequest{}
		err := q.Each("roleCurrency", func(s string) error {
			b, err := api.ParsePolicy(s, true)
			req.p.RolesCurrency = append(req.p.RolesCurrency, b)
			return err
		})
		if err != nil {
			return nil, err
		}
		req.ranged, err = parseRanged(r.Header, "withdrawalId", "withdrawal id", rangeStartTx)
		return req, err
	}, v.readWithdrawals)
}

func (v *View) readWithdrawals(ctx context.Context, req *withdrawalListRequest) (api.Answer, error) {
	pr, p := req.pr, &req.p
	p.Descending = pr.desc
	if pr.hasVal {
		wd, _, err := v.env.Contracts.WithdrawalGet(ctx, req.start)
		if errors.Is(err, contractstore.ErrNotFound) {
			err = &rangeError{"Initial withdrawal ID not found"}
		}
		if err != nil {
			return api.Answer{}, err
		}
		p.After = wd.Seq - 1
		if pr.desc {
			p.After = wd.LastSeq + 1
		}
	}
	var first firstRead
	p.Count = true
	items, err := readRange(pr, func(limit int) ([]contractstore.Withdrawal, bool, error) {
		p.Limit = limit
		page, err := v.env.Contracts.WithdrawalList(ctx, p)
		if err != nil {
			return nil, false, err
		}
		first.keep(&p.Count, page.Total, page.At)
		if n := len(page.Withdrawals); n > 0 {
			p.After = page.Withdrawals[n-1].LastSeq
			if pr.desc {
				p.After = page.Withdrawals[n-1].Seq
			}
		}
		return page.Withdrawals, page.More, nil
	}, func(wd *contractstore.Withdrawal) bool { return wd.TxID == req.start }, "Initial withdrawal ID not found")
	if err != nil {
		return api.Answer{}, err
	}
	out := make([]item, len(items))
	for i := range items {
		wd := &items[i]
		links := withdrawalLinks{Withdrawal: linkWithdrawal(wd.TxID)}
		if len(wd.Payouts) > 0 {
			links.Contract, links.Transactions = linkContract(wd.Payouts[0].ContractID), linkTransactions(wd.Payouts[0].ContractID)
		}
		out[i] = item{Resource: withdrawalHeaderOf(wd), Links: links}
	}
	return page(pr, first.at, spanOf(items, func(wd *contractstore.Withdrawal) string { return wd.TxID.String() }), out, first.total)
}

func (v *View) withdrawalGet() http.HandlerFunc {
	return handle(v, func(r *http.Request, q *api.Query) (chain.Hash32, error) {
		return pathTx(r, "withdrawalId", "withdrawal id")
	}, func(ctx context.Context, tx chain.Hash32) (api.Answer, error) {
		wd, at, err := v.env.Contracts.WithdrawalGet(ctx, tx)
		if errors.Is(err, contractstore.ErrNotFound) {
			err = notFound("Withdrawal not found")
		}
		if err != nil {
			return api.Answer{At: at}, err
		}
		// The Runtime answers a withdrawal as it is, without links.
		return one(at, withdrawalOf(wd))
	})
}
