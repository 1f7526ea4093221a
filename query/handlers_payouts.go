package query

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
)

func (s *Server) payoutList(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "contractId", "roleToken", "status", "limit", "cursor")
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	p, err := payoutListParams(q)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	ctx, cancel, ok := s.begin(w, r, q)
	if !ok {
		return
	}
	defer cancel()
	page, err := s.cfg.Contracts.PayoutList(ctx, p)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	results := make([]payoutJSON, len(page.Payouts))
	for i := range page.Payouts {
		results[i] = payoutOf(&page.Payouts[i])
	}
	var next string
	if page.More {
		last := page.Payouts[len(page.Payouts)-1]
		next = encodeCursor(cursorPayouts, strconv.FormatInt(last.Seq, 10), last.ID.TxID.String(),
			strconv.FormatUint(uint64(last.ID.Index), 10))
	}
	s.list(w, r, q, page.At, results, next, nil)
}

func payoutListParams(q *query) (*contractstore.PayoutListParams, error) {
	p := &contractstore.PayoutListParams{}
	var err error
	if p.Limit, err = q.limit(); err != nil {
		return nil, err
	}
	ids, err := q.list("contractId")
	if err != nil {
		return nil, err
	}
	for _, v := range ids {
		id, err := parseContractID("contract_id", v)
		if err != nil {
			return nil, err
		}
		p.Contracts = append(p.Contracts, id)
	}
	roles, err := q.list("roleToken")
	if err != nil {
		return nil, err
	}
	for _, v := range roles {
		role, err := parseRole(v)
		if err != nil {
			return nil, err
		}
		p.Roles = append(p.Roles, role)
	}
	status, err := q.one("status")
	if err != nil {
		return nil, err
	}
	switch contractstore.PayoutStatus(status) {
	case "", contractstore.PayoutAvailable, contractstore.PayoutWithdrawn, contractstore.PayoutPaid:
		p.Status = contractstore.PayoutStatus(status)
	default:
		return nil, bad("bad_status", fmt.Sprintf("status %q: want available, withdrawn or paid", clip(status)))
	}
	c, err := q.one("cursor")
	if err != nil || c == "" {
		return p, err
	}
	parts, err := decodeCursor(c, cursorPayouts, 3)
	if err != nil {
		return nil, err
	}
	seq, err1 := strconv.ParseInt(parts[0], 10, 64)
	ref, err2 := chain.ParseTxOutRef(parts[1] + "#" + parts[2])
	if err1 != nil || err2 != nil || seq < 0 {
		return nil, bad("bad_cursor", "malformed cursor: use the cursor or next link of a previous page")
	}
	p.After = &contractstore.PayoutKey{Seq: seq, ID: ref}
	return p, nil
}

func (s *Server) payoutGet(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	id, err := parseContractID("payout_id", r.PathValue("payoutId"))
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	ctx, cancel, ok := s.begin(w, r, q)
	if !ok {
		return
	}
	defer cancel()
	p, at, err := s.cfg.Contracts.PayoutGet(ctx, id)
	setPosition(w, at, s.cfg.Status().NodeTip)
	if err != nil {
		s.fail(w, r, err, "payout "+id.String())
		return
	}
	s.one(w, at, payoutOf(p))
}

func (s *Server) withdrawalList(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "contractId", "limit", "cursor")
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	p := &contractstore.WithdrawalListParams{}
	if p.Limit, err = q.limit(); err != nil {
		s.fail(w, r, err, "")
		return
	}
	ids, err := q.list("contractId")
	for _, v := range ids {
		var id chain.TxOutRef
		if err == nil {
			id, err = parseContractID("contract_id", v)
			p.Contracts = append(p.Contracts, id)
		}
	}
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	if p.After, err = q.cursorAfter(cursorWithdrawals); err != nil {
		s.fail(w, r, err, "")
		return
	}
	ctx, cancel, ok := s.begin(w, r, q)
	if !ok {
		return
	}
	defer cancel()
	page, err := s.cfg.Contracts.WithdrawalList(ctx, p)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	results := make([]withdrawalJSON, len(page.Withdrawals))
	for i := range page.Withdrawals {
		results[i] = withdrawalOf(&page.Withdrawals[i])
	}
	var next string
	if page.More && len(page.Withdrawals) > 0 {
		next = encodeCursor(cursorWithdrawals, strconv.FormatInt(page.Withdrawals[len(page.Withdrawals)-1].LastSeq, 10))
	}
	s.list(w, r, q, page.At, results, next, nil)
}

func (s *Server) withdrawalGet(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	tx, err := parseTxID(r.PathValue("txId"))
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	ctx, cancel, ok := s.begin(w, r, q)
	if !ok {
		return
	}
	defer cancel()
	wd, at, err := s.cfg.Contracts.WithdrawalGet(ctx, tx)
	setPosition(w, at, s.cfg.Status().NodeTip)
	if err != nil {
		s.fail(w, r, err, "withdrawal "+tx.String())
		return
	}
	s.one(w, at, withdrawalOf(wd))
}
