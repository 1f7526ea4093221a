package query

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/record"
)

type route struct {
	pattern string
	handler http.HandlerFunc
}

func (s *Server) routes() []route {
	return []route{
		{"GET /contracts", s.contractList},
		{"GET /contracts/{contractId}", s.contractGet},
		{"GET /contracts/{contractId}/transactions", s.transactionList},
		{"GET /contracts/{contractId}/transactions/{txId}", s.transactionGet},
		{"GET /contracts/{contractId}/history", s.contractHistory},
		{"GET /contracts/{contractId}/next", s.contractNext},
		{"GET /payouts", s.payoutList},
		{"GET /payouts/{payoutId}", s.payoutGet},
		{"GET /withdrawals", s.withdrawalList},
		{"GET /withdrawals/{txId}", s.withdrawalGet},
		{"GET /transactions/{txId}", s.transactionOfTx},
		{"GET /status", s.status},
		{"GET /healthz", s.healthz},
		{"GET /readyz", s.readyz},
		{"GET /openapi.json", s.openAPI},
	}
}

// begin bounds the request's reads and waits for minSeq. When it returns
// false it has answered (the projection did not reach minSeq in time).
func (s *Server) begin(w http.ResponseWriter, r *http.Request, q *query) (context.Context, context.CancelFunc, bool) {
	minSeq, err := q.minSeq()
	if err != nil {
		s.fail(w, r, err, "")
		return nil, nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	if minSeq > 0 {
		wctx, wcancel := context.WithTimeout(ctx, s.cfg.MinSeqWait)
		err := s.cfg.Projection.WaitFor(wctx, minSeq)
		wcancel()
		if err != nil {
			cancel()
			at := s.cfg.Projection.Applied()
			setPosition(w, at, s.cfg.Status().NodeTip)
			w.Header().Set(HeaderRetryAfter, "1")
			writeError(w, http.StatusServiceUnavailable, "not_yet_applied",
				fmt.Sprintf("the projection has applied seq %d, not yet seq %d (waited %s); retry later", at.Seq, minSeq, s.cfg.MinSeqWait))
			return nil, nil, false
		}
	}
	return ctx, cancel, true
}

// list answers a page in the envelope.
func (s *Server) list(w http.ResponseWriter, r *http.Request, q *query, at contractstore.Position, results any, next string, total *int64) {
	tip := s.cfg.Status().NodeTip
	setPosition(w, at, tip)
	env := envelope{Results: results, Total: total, Seq: at.Seq, Block: at.Block, NodeTip: tipOf(tip)}
	if next != "" {
		env.Cursor, env.Next = &next, nextLink(r, q, next)
	}
	writeJSON(w, http.StatusOK, env)
}

// one answers a single object.
func (s *Server) one(w http.ResponseWriter, at contractstore.Position, v any) {
	setPosition(w, at, s.cfg.Status().NodeTip)
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) contractList(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "contractId", "roleCurrency", "tag", "partyAddress", "partyRole", "status", "order", "limit", "cursor")
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	p, err := contractListParams(q)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	ctx, cancel, ok := s.begin(w, r, q)
	if !ok {
		return
	}
	defer cancel()
	page, err := s.cfg.Contracts.ContractList(ctx, p)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	var next, cursor *string
	if page.More {
		kind := cursorContractsAsc
		if p.Descending {
			kind = cursorContractsDesc
		}
		c := encodeCursor(kind, strconv.FormatInt(page.Contracts[len(page.Contracts)-1].Seq, 10))
		cursor, next = &c, nextLink(r, q, c)
	}
	tip := s.cfg.Status().NodeTip
	setPosition(w, page.At, tip)
	bp := bytesPool.Get().(*[]byte)
	b := appendContractPage((*bp)[:0], page, next, cursor, tip)
	writeBody(w, http.StatusOK, b)
	*bp = b[:0]
	bytesPool.Put(bp)
}

func contractListParams(q *query) (*contractstore.ContractListParams, error) {
	p := &contractstore.ContractListParams{}
	var err error
	if p.Limit, err = q.limit(); err != nil {
		return nil, err
	}
	vals := func(name string, each func(string) error) error {
		vs, err := q.list(name)
		for _, v := range vs {
			if err == nil {
				err = each(v)
			}
		}
		return err
	}
	f := &p.Filter
	if err := vals("contractId", func(v string) error {
		id, err := parseContractID("contract_id", v)
		f.Contracts = append(f.Contracts, id)
		return err
	}); err != nil {
		return nil, err
	}
	if err := vals("roleCurrency", func(v string) error {
		b, err := parsePolicy(v, true)
		f.RolesCurrency = append(f.RolesCurrency, b)
		return err
	}); err != nil {
		return nil, err
	}
	if err := vals("tag", func(v string) error {
		t, err := parseTag(v)
		f.Tags = append(f.Tags, t)
		return err
	}); err != nil {
		return nil, err
	}
	if err := vals("partyAddress", func(v string) error {
		a, err := parseAddress(v)
		f.PartyAddress = append(f.PartyAddress, a)
		return err
	}); err != nil {
		return nil, err
	}
	if err := vals("partyRole", func(v string) error {
		role, err := parseRole(v)
		f.PartyRole = append(f.PartyRole, role)
		return err
	}); err != nil {
		return nil, err
	}
	status, err := q.one("status")
	if err != nil {
		return nil, err
	}
	switch status {
	case "", "open", "closed":
		f.Status = contractstore.Status(status)
	default:
		return nil, bad("bad_status", fmt.Sprintf("status %q: want open or closed", clip(status)))
	}
	order, err := q.one("order")
	if err != nil {
		return nil, err
	}
	kind := cursorContractsAsc
	switch order {
	case "", "asc":
	case "desc":
		p.Descending, kind = true, cursorContractsDesc
	default:
		return nil, bad("bad_order", fmt.Sprintf("order %q: want asc or desc", clip(order)))
	}
	if p.After, err = q.cursorAfter(kind); err != nil {
		return nil, err
	}
	return p, nil
}

func (s *Server) contractGet(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	id, err := parseContractID("contract_id", r.PathValue("contractId"))
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	ctx, cancel, ok := s.begin(w, r, q)
	if !ok {
		return
	}
	defer cancel()
	if cache := s.cfg.Cache; cache != nil {
		applied := s.cfg.Projection.Applied()
		if body, at, ok := cache.get(id); ok {
			if applied.Seq > at.Seq {
				at = applied
			}
			setPosition(w, at, s.cfg.Status().NodeTip)
			writeBody(w, http.StatusOK, body)
			return
		}
	}
	c, at, err := s.cfg.Contracts.ContractGet(ctx, id)
	setPosition(w, at, s.cfg.Status().NodeTip)
	if err != nil {
		s.fail(w, r, err, "contract "+id.String())
		return
	}
	body, err := encodeJSON(contractOf(c))
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	if s.cfg.Cache != nil {
		s.cfg.Cache.put(id, body, at)
	}
	writeBody(w, http.StatusOK, body)
}

func (s *Server) transactionList(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "limit", "cursor")
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	p := &contractstore.TransactionListParams{}
	if p.Contract, err = parseContractID("contract_id", r.PathValue("contractId")); err != nil {
		s.fail(w, r, err, "")
		return
	}
	if p.Limit, err = q.limit(); err != nil {
		s.fail(w, r, err, "")
		return
	}
	if p.After, err = q.cursorAfter(cursorTransactions); err != nil {
		s.fail(w, r, err, "")
		return
	}
	ctx, cancel, ok := s.begin(w, r, q)
	if !ok {
		return
	}
	defer cancel()
	page, err := s.cfg.Contracts.TransactionList(ctx, p)
	if err != nil {
		if page != nil {
			setPosition(w, page.At, s.cfg.Status().NodeTip)
		}
		s.fail(w, r, err, "contract "+p.Contract.String())
		return
	}
	results := make([]transactionHeaderJSON, len(page.Transactions))
	for i := range page.Transactions {
		results[i] = transactionHeaderOf(&page.Transactions[i])
	}
	var next string
	if page.More {
		next = encodeCursor(cursorTransactions, strconv.FormatInt(page.Transactions[len(page.Transactions)-1].Seq, 10))
	}
	s.list(w, r, q, page.At, results, next, nil)
}

func (s *Server) transactionGet(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	id, err := parseContractID("contract_id", r.PathValue("contractId"))
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
	t, at, err := s.cfg.Contracts.TransactionGet(ctx, id, tx)
	setPosition(w, at, s.cfg.Status().NodeTip)
	if err != nil {
		s.fail(w, r, err, "transaction "+tx.String()+" of contract "+id.String())
		return
	}
	s.one(w, at, transactionJSON{transactionHeaderJSON: transactionHeaderOf(t), Details: rawOr(t.Payload, "null")})
}

// transactionOfTx answers the step a transaction made, of whichever
// contract (a search by transaction id alone: the explorer's search box).
func (s *Server) transactionOfTx(w http.ResponseWriter, r *http.Request) {
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
	t, at, err := s.cfg.Contracts.TransactionOfTx(ctx, tx)
	setPosition(w, at, s.cfg.Status().NodeTip)
	if err != nil {
		s.fail(w, r, err, "step of transaction "+tx.String())
		return
	}
	s.one(w, at, transactionJSON{transactionHeaderJSON: transactionHeaderOf(t), Details: rawOr(t.Payload, "null")})
}

// historyKinds are the record kinds a contract's history shows: every kind
// but the RolledBack markers, which concern no contract (a rolled-back
// record carries the marker's seq in rolledBackBy).
var historyKinds = []record.Kind{record.KindContractCreated, record.KindInputsApplied,
	record.KindPayoutWithdrawn, record.KindApplyInputsRejected}

// contractHistory lists a contract's history records, as of the history
// head when the first page was asked: the current ones, or with
// includeRolledBack=true every one, rolled back or not.
func (s *Server) contractHistory(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "includeRolledBack", "limit", "cursor")
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	id, err := parseContractID("contract_id", r.PathValue("contractId"))
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	all, err := q.flag("includeRolledBack")
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	limit, err := q.limit()
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	mode := int64(record.ModeSnapshot)
	if all {
		mode = int64(record.ModeLog)
	}
	var asOf, after int64 = -1, 0
	if n, err := q.cursor(cursorHistory, 3); err != nil || n != nil {
		if err == nil && n[0] != mode {
			err = bad("bad_cursor", "the cursor was made with another includeRolledBack")
		}
		if err != nil {
			s.fail(w, r, err, "")
			return
		}
		asOf, after = n[1], n[2]
	}
	ctx, cancel, ok := s.begin(w, r, q)
	if !ok {
		return
	}
	defer cancel()
	if _, err := s.cfg.History.ContractGet(ctx, id); err != nil {
		s.fail(w, r, translateHistory(err), "contract "+id.String())
		return
	}
	if asOf < 0 {
		asOf = s.cfg.History.Head()
	}
	at := contractstore.Position{Seq: asOf}
	recs := []record.Record{}
	if asOf > 0 {
		head, err := s.cfg.History.RecordGet(ctx, asOf)
		if err != nil {
			s.fail(w, r, translateHistory(err), "")
			return
		}
		at.Block = head.Block
		p := &record.RecordListParams{Filter: record.Filter{Contracts: []chain.TxOutRef{id}, Kinds: historyKinds},
			Mode: record.Mode(mode), After: after, Limit: limit + 1}
		if p.Mode == record.ModeSnapshot {
			p.Snapshot = asOf
		} else {
			p.UpTo = asOf
		}
		if recs, err = s.cfg.History.RecordList(ctx, p); err != nil {
			s.fail(w, r, err, "")
			return
		}
	}
	if recs == nil {
		recs = []record.Record{}
	}
	var next string
	if len(recs) > limit {
		recs = recs[:limit]
		next = encodeCursor(cursorHistory, strconv.FormatInt(mode, 10), strconv.FormatInt(asOf, 10),
			strconv.FormatInt(recs[len(recs)-1].Seq, 10))
	}
	s.list(w, r, q, at, recs, next, nil)
}

// translateHistory maps the history's not-found to the contract store's.
func translateHistory(err error) error {
	if isHistoryNotFound(err) {
		return contractstore.ErrNotFound
	}
	return err
}
