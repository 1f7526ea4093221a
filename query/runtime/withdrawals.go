package runtime

import (
	"context"
	"net/http"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// withdrawalListRequest is a withdrawal list's filter and range.
type withdrawalListRequest = listRequest[contractstore.WithdrawalListParams, chain.Hash32]

func (v *View) withdrawalList() http.HandlerFunc {
	return rangedList(v, func(r *http.Request, q *api.Query) (contractstore.WithdrawalListParams, error) {
		var p contractstore.WithdrawalListParams
		var err error
		p.RolesCurrency, err = api.Values(q, "roleCurrency", func(s string) ([]byte, error) { return api.ParsePolicy(s, true) })
		return p, err
	}, "withdrawalId", "withdrawal id", rangeStartTx, v.readWithdrawals)
}

func (v *View) readWithdrawals(ctx context.Context, req *withdrawalListRequest) (api.Answer, error) {
	pr, p := req.pr, &req.sel
	p.Descending = pr.desc
	if pr.hasVal {
		wd, _, err := v.env.Contracts.WithdrawalGet(ctx, req.start)
		if err != nil {
			return api.Answer{}, missing(err, &rangeError{"Initial withdrawal ID not found"})
		}
		p.After = pr.after(wd.Seq, wd.LastSeq)
	}
	var first firstRead
	p.Count = true
	items, err := readRange(pr, func(limit int) ([]contractstore.Withdrawal, bool, error) {
		p.Limit = limit
		page, err := v.env.Contracts.WithdrawalList(ctx, p)
		if err != nil {
			return nil, false, err
		}
		return nextPage(&first, &p.Count, page.Withdrawals, page.More, page.Total, page.At, func(last *contractstore.Withdrawal) {
			p.After = last.LastSeq
			if pr.desc {
				p.After = last.Seq
			}
		})
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
		if err != nil {
			return api.Answer{At: at}, missing(err, notFound("Withdrawal not found"))
		}
		// The Runtime answers a withdrawal as it is, without links.
		return one(at, withdrawalOf(wd))
	})
}
