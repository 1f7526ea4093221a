package runtime

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// payoutListRequest is a payout list's filter and range.
type payoutListRequest = listRequest[contractstore.PayoutListParams, chain.TxOutRef]

func (v *View) payoutList() http.HandlerFunc {
	return rangedList(v, payoutListParams, "payoutId", "payout id", rangeStartRef, v.readPayouts)
}

// payoutListParams reads a payout list's filter: role payouts only.
func payoutListParams(_ *http.Request, q *api.Query) (contractstore.PayoutListParams, error) {
	p := contractstore.PayoutListParams{RolesOnly: true}
	var err error
	p.Contracts, err = api.Values(q, "contractId", func(s string) (chain.TxOutRef, error) {
		id, err := chain.ParseTxOutRef(s)
		if err != nil {
			return id, invalid("bad_contract_id", fmt.Sprintf("Invalid contract id %q: want TXID#INDEX", api.Clip(s)))
		}
		return id, nil
	})
	if err == nil {
		p.Roles, err = api.Values(q, "roleToken", api.ParseRole)
	}
	if err == nil {
		var status string
		status, err = q.One("status")
		switch contractstore.PayoutStatus(status) {
		case "", contractstore.PayoutAvailable, contractstore.PayoutWithdrawn:
			p.Status = contractstore.PayoutStatus(status)
		default:
			if err == nil {
				err = invalid("bad_status", fmt.Sprintf("Invalid status %q: want available or withdrawn", api.Clip(status)))
			}
		}
	}
	return p, err
}

func (v *View) readPayouts(ctx context.Context, req *payoutListRequest) (api.Answer, error) {
	pr, p := req.pr, &req.sel
	p.Descending = pr.desc
	var starting []contractstore.Payout
	if pr.hasVal {
		po, _, err := v.env.Contracts.PayoutGet(ctx, req.start)
		if err == nil && !payoutMatches(po, p) {
			err = contractstore.ErrNotFound
		}
		if err != nil {
			return api.Answer{}, missing(err, &rangeError{"Initial payout ID not found"})
		}
		starting = []contractstore.Payout{*po}
		p.After = &contractstore.PayoutKey{Seq: po.Seq, ID: po.ID}
	}
	var first firstRead
	p.Count = true
	rest, err := collect(reads(pr)-len(starting), func(limit int) ([]contractstore.Payout, bool, error) {
		p.Limit = limit
		page, err := v.env.Contracts.PayoutList(ctx, p)
		if err != nil {
			return nil, false, err
		}
		return nextPage(&first, &p.Count, page.Payouts, page.More, page.Total, page.At,
			func(last *contractstore.Payout) { p.After = &contractstore.PayoutKey{Seq: last.Seq, ID: last.ID} })
	})
	if err != nil {
		return api.Answer{}, err
	}
	if first.at == (contractstore.Position{}) {
		first.at = v.env.Projection.Applied()
	}
	items := window(append(starting, rest...), pr)
	out := make([]item, len(items))
	for i := range items {
		po := &items[i]
		out[i] = item{Resource: payoutHeaderOf(po), Links: payoutLink{Payout: linkPayout(po.ID)}}
	}
	return page(pr, first.at, spanOf(items, func(po *contractstore.Payout) string { return po.ID.String() }), out, first.total)
}

// payoutMatches reports whether a payout is in the list p selects.
func payoutMatches(po *contractstore.Payout, p *contractstore.PayoutListParams) bool {
	if p.RolesOnly && po.Role == nil {
		return false
	}
	if len(p.Contracts) > 0 && !slices.Contains(p.Contracts, po.ContractID) {
		return false
	}
	if p.Status != "" && po.Status != p.Status {
		return false
	}
	if len(p.Roles) == 0 {
		return true
	}
	for _, role := range p.Roles {
		if po.Role != nil && string(role.Currency) == string(po.RolesCurrency) && roleText(role) == *po.Role {
			return true
		}
	}
	return false
}

// roleText is a role's name as payouts store it (the Marlowe name escape).
func roleText(r record.RoleRef) string { return marlowe.NameText(r.Name) }

func (v *View) payoutGet() http.HandlerFunc {
	return handle(v, func(r *http.Request, q *api.Query) (chain.TxOutRef, error) {
		return pathRef(r, "payoutId", "payout id", "bad_payout_id")
	}, func(ctx context.Context, id chain.TxOutRef) (api.Answer, error) {
		po, at, err := v.env.Contracts.PayoutGet(ctx, id)
		if err == nil && po.Role == nil {
			err = contractstore.ErrNotFound // an address payout: the Runtime has none
		}
		err = missing(err, notFound("Payout not found"))
		var addr string
		if err == nil {
			addr, err = v.payoutValidatorAddress(ctx, po)
		}
		if err != nil {
			return api.Answer{At: at}, err
		}
		links := payoutLinks{Contract: linkContract(po.ContractID), Transaction: linkTransaction(po.ContractID, po.TxID)}
		if po.Withdrawal != nil {
			links.Withdrawal = linkWithdrawal(po.Withdrawal.TxID)
		}
		return one(at, item{Resource: payoutStateJSON{payoutHeaderJSON: payoutHeaderOf(po), PayoutValidatorAddress: addr}, Links: links})
	})
}

// payoutValidatorAddress is a role payout's output address: as recorded,
// or, for payouts stored before it was, the payout validator's address of
// the contract's script version without a stake credential.
func (v *View) payoutValidatorAddress(ctx context.Context, po *contractstore.Payout) (string, error) {
	if po.ValidatorAddress != "" {
		return po.ValidatorAddress, nil
	}
	c, _, err := v.env.Contracts.ContractGet(ctx, po.ContractID)
	if err != nil {
		return "", err
	}
	sv, ok := marlowe.VersionByName(c.Version)
	if !ok {
		return "", fmt.Errorf("payout %s: contract %s has the unknown script version %q", po.ID, po.ContractID, c.Version)
	}
	network := marlowe.Testnet
	if v.cfg.Status().NetworkMagic == mainnetMagic {
		network = marlowe.Mainnet
	}
	pa := marlowe.PartyAddress{Network: network, Address: marlowe.Address{Payment: marlowe.Credential{Kind: marlowe.ScriptCredential, Hash: sv.Payout[:]}}}
	return pa.Bech32()
}
