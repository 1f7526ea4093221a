package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/record"
)

// collect reads a list from its start through fetch (one backend page of
// at most limit items a call, the cursor kept by the caller) until want
// items or the end of the list.
func collect[T any](want int, fetch func(limit int) (items []T, more bool, err error)) ([]T, error) {
	var out []T
	for len(out) < want {
		items, more, err := fetch(min(want-len(out), contractstore.MaxLimit))
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if !more || len(items) == 0 {
			break
		}
	}
	return out, nil
}

// skip drops a range's offset from the items read from its start.
func skip[T any](items []T, pr *pageRange) []T {
	if pr.offset >= len(items) {
		return items[:0]
	}
	items = items[pr.offset:]
	if len(items) > pr.limit {
		items = items[:pr.limit]
	}
	return items
}

// reads is how many items a range reads from its start: at least one when
// it names a start, whose presence the answer checks.
func reads(pr *pageRange) int {
	if pr.hasVal {
		return max(pr.want(), 1)
	}
	return pr.want()
}

// rtPage answers a page: 206 with the paging headers, as servant does for
// every paged answer.
func (s *Server) rtPage(w http.ResponseWriter, pr *pageRange, at contractstore.Position, keys []string, items []rtItem, total *int64) {
	s.rtPosition(w, at)
	setPageHeaders(w, pr, keys)
	if total != nil {
		w.Header().Set("Total-Count", strconv.FormatInt(*total, 10))
	}
	if items == nil {
		items = []rtItem{}
	}
	rtWriteJSON(w, http.StatusPartialContent, rtList{Results: items})
}

func rangeStartRef(pr *pageRange, what string) (chain.TxOutRef, error) {
	ref, err := chain.ParseTxOutRef(pr.value)
	if err != nil {
		return ref, &rangeError{fmt.Sprintf("Invalid range value: %s %q: want TXID#INDEX", what, clip(pr.value))}
	}
	pr.value = ref.String()
	return ref, nil
}

func rangeStartTx(pr *pageRange, what string) (chain.Hash32, error) {
	h, err := chain.ParseHash32(pr.value)
	if err != nil {
		return h, &rangeError{fmt.Sprintf("Invalid range value: %s %q: want 64 hex digits", what, clip(pr.value))}
	}
	pr.value = h.String()
	return h, nil
}

func (s *Server) rtContractList(w http.ResponseWriter, r *http.Request) {
	q, err := parseRuntimeQuery(r)
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	f, err := rtContractFilter(q)
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	pr, err := parseRange(r.Header, "contractId")
	var start chain.TxOutRef
	if err == nil && pr.hasVal {
		start, err = rangeStartRef(pr, "contract id")
	}
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	ctx, cancel, ok := s.rtBegin(w, r, q)
	if !ok {
		return
	}
	defer cancel()
	p := &contractstore.ContractListParams{Filter: *f, Descending: pr.desc}
	if pr.hasVal {
		c, _, err := s.cfg.Contracts.ContractGet(ctx, start)
		if errors.Is(err, contractstore.ErrNotFound) {
			err = &rangeError{"Initial contract ID not found"}
		}
		if err != nil {
			s.rtError(w, r, err)
			return
		}
		p.After = c.Seq - 1
		if pr.desc {
			p.After = c.Seq + 1
		}
	}
	var at contractstore.Position
	var total *int64
	items, err := collect(reads(pr), func(limit int) ([]contractstore.Contract, bool, error) {
		p.Limit = limit
		page, err := s.cfg.Contracts.ContractList(ctx, p)
		if err != nil {
			return nil, false, err
		}
		if total == nil {
			total = page.Total
		}
		at = page.At
		if n := len(page.Contracts); n > 0 {
			p.After = page.Contracts[n-1].Seq
		}
		return page.Contracts, page.More, nil
	})
	if err == nil && pr.hasVal && (len(items) == 0 || items[0].ID != start) {
		err = &rangeError{"Initial contract ID not found"}
	}
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	if pr.want() == 0 {
		items = items[:0]
	}
	items = skip(items, pr)
	keys := make([]string, len(items))
	out := make([]rtItem, len(items))
	for i := range items {
		c := &items[i]
		keys[i] = c.ID.String()
		out[i] = rtItem{Resource: rtContractHeaderOf(c), Links: rtContractLinks{Contract: linkContract(c.ID), Transactions: linkTransactions(c.ID)}}
	}
	s.rtPage(w, pr, at, keys, out, total)
}

// rtContractFilter reads the Runtime's contract filters.
func rtContractFilter(q *rtQuery) (*contractstore.ContractFilter, error) {
	f := &contractstore.ContractFilter{}
	each := func(name string, fn func(string) error) error {
		vs, err := q.list(name)
		for _, v := range vs {
			if err == nil {
				err = fn(v)
			}
		}
		return err
	}
	if err := each("roleCurrency", func(v string) error {
		b, err := parsePolicy(v, true)
		f.RolesCurrency = append(f.RolesCurrency, b)
		return asRuntimeBad(err, "Invalid role currency")
	}); err != nil {
		return nil, err
	}
	if err := each("tag", func(v string) error {
		t, err := parseTag(v)
		f.Tags = append(f.Tags, t)
		return asRuntimeBad(err, "Invalid tag")
	}); err != nil {
		return nil, err
	}
	if err := each("partyAddress", func(v string) error {
		a, err := parseAddress(v)
		f.PartyAddress = append(f.PartyAddress, a)
		return asRuntimeBad(err, "Invalid address")
	}); err != nil {
		return nil, err
	}
	if err := each("partyRole", func(v string) error {
		role, err := parseRole(v)
		f.PartyRole = append(f.PartyRole, role)
		return asRuntimeBad(err, "Invalid role token")
	}); err != nil {
		return nil, err
	}
	return f, nil
}

// asRuntimeBad turns a native bad request into the Runtime's 400, with the
// Runtime's message and the native one in details.
func asRuntimeBad(err error, message string) error {
	if err == nil {
		return nil
	}
	var br *badRequest
	if errors.As(err, &br) {
		return &rtFail{status: http.StatusBadRequest, code: "BadRequest", message: message + ": " + br.message,
			details: map[string]string{"code": br.code}}
	}
	return err
}

// rtContractID reads the contract id of a view path.
func rtContractID(r *http.Request) (chain.TxOutRef, error) {
	id, err := chain.ParseTxOutRef(r.PathValue("contractId"))
	if err != nil {
		return id, rtBad(fmt.Sprintf("Invalid contract id value %q: want TXID#INDEX (# is %%23 in a URL)", clip(r.PathValue("contractId"))))
	}
	return id, nil
}

func (s *Server) rtContractGet(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("contractId") == "sources" {
		s.rtNotFound(w, r)
		return
	}
	q, err := parseRuntimeQuery(r)
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	id, err := rtContractID(r)
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	ctx, cancel, ok := s.rtBegin(w, r, q)
	if !ok {
		return
	}
	defer cancel()
	c, at, err := s.cfg.Contracts.ContractGet(ctx, id)
	s.rtPosition(w, at)
	if errors.Is(err, contractstore.ErrNotFound) {
		err = rtNotFound("Contract not found")
	}
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	rtWriteJSON(w, http.StatusOK, rtItem{Resource: rtContractStateOf(c), Links: rtTransactionsLink{Transactions: linkTransactions(c.ID)}})
}

func decodeStep(t *contractstore.Transaction) (*stepPayload, error) {
	var p stepPayload
	if err := json.Unmarshal(t.Payload, &p); err != nil {
		return nil, fmt.Errorf("step %s of %s: stored payload: %w", t.TxID, t.ContractID, err)
	}
	return &p, nil
}

func (s *Server) rtTransactionList(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("contractId") == "sources" {
		s.rtNotFound(w, r)
		return
	}
	q, err := parseRuntimeQuery(r)
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	id, err := rtContractID(r)
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	pr, err := parseRange(r.Header, "transactionId")
	var start chain.Hash32
	if err == nil && pr.hasVal {
		start, err = rangeStartTx(pr, "transaction id")
	}
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	ctx, cancel, ok := s.rtBegin(w, r, q)
	if !ok {
		return
	}
	defer cancel()
	p := &contractstore.TransactionListParams{Contract: id, Descending: pr.desc, AppliedOnly: true, WithPayload: true}
	if pr.hasVal {
		t, _, err := s.cfg.Contracts.TransactionGet(ctx, id, start)
		if err == nil && t.Kind != contractstore.TxApplied {
			err = contractstore.ErrNotFound
		}
		if errors.Is(err, contractstore.ErrNotFound) {
			err = &rangeError{"Initial transaction ID not found"}
		}
		if err != nil {
			s.rtError(w, r, err)
			return
		}
		p.After = t.Seq - 1
		if pr.desc {
			p.After = t.Seq + 1
		}
	}
	var at contractstore.Position
	items, err := collect(reads(pr), func(limit int) ([]contractstore.Transaction, bool, error) {
		p.Limit = limit
		page, err := s.cfg.Contracts.TransactionList(ctx, p)
		if err != nil {
			return nil, false, err
		}
		at = page.At
		if n := len(page.Transactions); n > 0 {
			p.After = page.Transactions[n-1].Seq
		}
		return page.Transactions, page.More, nil
	})
	if errors.Is(err, contractstore.ErrNotFound) {
		err = rtNotFound("Contract not found")
	}
	if err == nil && pr.hasVal && (len(items) == 0 || items[0].TxID != start) {
		err = &rangeError{"Initial transaction ID not found"}
	}
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	if pr.want() == 0 {
		items = items[:0]
	}
	items = skip(items, pr)
	keys := make([]string, len(items))
	out := make([]rtItem, len(items))
	for i := range items {
		t := &items[i]
		sp, err := decodeStep(t)
		if err != nil {
			s.rtError(w, r, err)
			return
		}
		keys[i] = t.TxID.String()
		out[i] = rtItem{Resource: rtTxHeaderOf(t, sp), Links: rtTransactionLink{Transaction: linkTransaction(t.ContractID, t.TxID)}}
	}
	s.rtPage(w, pr, at, keys, out, nil)
}

func (s *Server) rtTransactionGet(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("contractId") == "sources" {
		s.rtNotFound(w, r)
		return
	}
	q, err := parseRuntimeQuery(r)
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	id, err := rtContractID(r)
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	tx, err := chain.ParseHash32(r.PathValue("transactionId"))
	if err != nil {
		s.rtError(w, r, rtBad(fmt.Sprintf("Invalid transaction id value %q: want 64 hex digits", clip(r.PathValue("transactionId")))))
		return
	}
	ctx, cancel, ok := s.rtBegin(w, r, q)
	if !ok {
		return
	}
	defer cancel()
	out, links, at, err := s.rtTransaction(ctx, id, tx)
	s.rtPosition(w, at)
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	rtWriteJSON(w, http.StatusOK, rtItem{Resource: out, Links: links})
}

// rtTransaction assembles a step's details: the step, the output it spent
// (the contract's creation or the step that made it), the step that spent
// its output, and the step replayed through the semantics.
func (s *Server) rtTransaction(ctx context.Context, id chain.TxOutRef, tx chain.Hash32) (*rtTxJSON, *rtTxLinks, contractstore.Position, error) {
	t, at, err := s.cfg.Contracts.TransactionGet(ctx, id, tx)
	if err == nil && t.Kind != contractstore.TxApplied {
		err = contractstore.ErrNotFound
	}
	if errors.Is(err, contractstore.ErrNotFound) {
		err = rtNotFound("Transaction not found")
	}
	if err != nil {
		return nil, nil, at, err
	}
	sp, err := decodeStep(t)
	if err != nil {
		return nil, nil, at, err
	}
	out := &rtTxJSON{rtTxHeaderJSON: rtTxHeaderOf(t, sp), InputUTxO: t.Input, Inputs: rawOr(sp.Inputs, "[]"),
		OutputUTxO: t.Output, Assets: assetsOf(record.Assets{}), Payouts: []rtPayoutJSON{}, Interval: sp.Interval}
	links := &rtTxLinks{}
	// The contract and state the step started from.
	if t.Input == id {
		c, _, err := s.cfg.Contracts.ContractGet(ctx, id)
		if err != nil {
			return nil, nil, at, err
		}
		if c.Body == nil {
			return nil, nil, at, fmt.Errorf("contract %s: stored without its body", id)
		}
		out.InputContract, out.InputState = rawOr(c.Body.InitialContract, "null"), rawOr(c.Body.InitialState, "null")
	} else {
		prev, _, err := s.cfg.Contracts.TransactionProducing(ctx, id, t.Input)
		if err != nil {
			return nil, nil, at, fmt.Errorf("the step that made %s: %w", t.Input, err)
		}
		pp, err := decodeStep(prev)
		if err != nil {
			return nil, nil, at, err
		}
		if pp.Output == nil {
			return nil, nil, at, fmt.Errorf("step %s: no output stored", prev.TxID)
		}
		var d datumParts
		if err := json.Unmarshal(pp.Output.Datum, &d); err != nil {
			return nil, nil, at, fmt.Errorf("step %s: output datum: %w", prev.TxID, err)
		}
		out.InputContract, out.InputState = d.contract(), d.state()
		links.Previous = linkTransaction(id, t.Input.TxID)
	}
	if sp.Output != nil {
		var d datumParts
		if err := json.Unmarshal(sp.Output.Datum, &d); err != nil {
			return nil, nil, at, fmt.Errorf("step %s: output datum: %w", t.TxID, err)
		}
		out.OutputContract, out.OutputState, out.Assets = d.contract(), d.state(), assetsOf(sp.Output.Assets)
		next, _, err := s.cfg.Contracts.TransactionSpending(ctx, id, sp.Output.Ref)
		switch {
		case err == nil:
			h := next.TxID
			out.ConsumingTx = &h
			links.Next = linkTransaction(id, h)
		case !errors.Is(err, contractstore.ErrNotFound):
			return nil, nil, at, err
		}
	}
	for _, po := range sp.Payouts {
		if po.Role != nil && po.Ref != nil {
			out.Payouts = append(out.Payouts, rtPayoutJSON{PayoutID: *po.Ref, Role: *po.Role, Assets: assetsOf(po.Assets)})
		}
	}
	iv := sp.Interval
	if iv.InvalidBefore == nil || iv.InvalidHereafter == nil || iv.FromMillis == nil || iv.ToMillis == nil {
		return nil, nil, at, fmt.Errorf("step %s: a Marlowe step without a bounded validity interval", t.TxID)
	}
	out.InvalidBefore = utcTime(s.cfg.Slots.SlotStart(*iv.InvalidBefore))
	out.InvalidHereafter = utcTime(s.cfg.Slots.SlotStart(*iv.InvalidHereafter))
	out.ReconstructedSemanticInput, out.ReconstructedSemanticOutput, err = reconstruct(out.InputContract, out.InputState, sp)
	if err != nil {
		return nil, nil, at, fmt.Errorf("step %s: %w", t.TxID, err)
	}
	return out, links, at, nil
}

// datumParts are the parts of a MarloweData (core JSON) a step shows.
type datumParts struct {
	Contract json.RawMessage `json:"marloweContract"`
	State    json.RawMessage `json:"marloweState"`
}

func (d *datumParts) contract() json.RawMessage { return nonNull(d.Contract) }
func (d *datumParts) state() json.RawMessage    { return nonNull(d.State) }

func (s *Server) rtPayoutList(w http.ResponseWriter, r *http.Request) {
	q, err := parseRuntimeQuery(r)
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	p := &contractstore.PayoutListParams{RolesOnly: true}
	ids, err := q.list("contractId")
	for _, v := range ids {
		var id chain.TxOutRef
		if id, err = chain.ParseTxOutRef(v); err != nil {
			err = rtBad(fmt.Sprintf("Invalid contract id %q: want TXID#INDEX", clip(v)))
			break
		}
		p.Contracts = append(p.Contracts, id)
	}
	if err == nil {
		var roles []string
		roles, err = q.list("roleToken")
		for _, v := range roles {
			role, perr := parseRole(v)
			if perr != nil {
				err = asRuntimeBad(perr, "Invalid role token")
				break
			}
			p.Roles = append(p.Roles, role)
		}
	}
	if err == nil {
		var status string
		status, err = q.one("status")
		switch contractstore.PayoutStatus(status) {
		case "", contractstore.PayoutAvailable, contractstore.PayoutWithdrawn:
			p.Status = contractstore.PayoutStatus(status)
		default:
			if err == nil {
				err = rtBad(fmt.Sprintf("Invalid status %q: want available or withdrawn", clip(status)))
			}
		}
	}
	pr, perr := parseRange(r.Header, "payoutId")
	var start chain.TxOutRef
	if perr == nil && pr.hasVal {
		start, perr = rangeStartRef(pr, "payout id")
	}
	if err == nil {
		err = perr
	}
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	ctx, cancel, ok := s.rtBegin(w, r, q)
	if !ok {
		return
	}
	defer cancel()
	p.Descending = pr.desc
	var first []contractstore.Payout
	if pr.hasVal {
		po, _, err := s.cfg.Contracts.PayoutGet(ctx, start)
		if err == nil && !payoutMatches(po, p) {
			err = contractstore.ErrNotFound
		}
		if errors.Is(err, contractstore.ErrNotFound) {
			err = &rangeError{"Initial payout ID not found"}
		}
		if err != nil {
			s.rtError(w, r, err)
			return
		}
		first = []contractstore.Payout{*po}
		p.After = &contractstore.PayoutKey{Seq: po.Seq, ID: po.ID}
	}
	var at contractstore.Position
	rest, err := collect(reads(pr)-len(first), func(limit int) ([]contractstore.Payout, bool, error) {
		p.Limit = limit
		page, err := s.cfg.Contracts.PayoutList(ctx, p)
		if err != nil {
			return nil, false, err
		}
		at = page.At
		if n := len(page.Payouts); n > 0 {
			p.After = &contractstore.PayoutKey{Seq: page.Payouts[n-1].Seq, ID: page.Payouts[n-1].ID}
		}
		return page.Payouts, page.More, nil
	})
	if err == nil && at == (contractstore.Position{}) {
		at = s.cfg.Projection.Applied()
	}
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	items := append(first, rest...)
	if pr.want() == 0 {
		items = items[:0]
	}
	items = skip(items, pr)
	keys := make([]string, len(items))
	out := make([]rtItem, len(items))
	for i := range items {
		po := &items[i]
		keys[i] = po.ID.String()
		out[i] = rtItem{Resource: rtPayoutHeaderOf(po), Links: rtPayoutLink{Payout: linkPayout(po.ID)}}
	}
	s.rtPage(w, pr, at, keys, out, nil)
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

func (s *Server) rtPayoutGet(w http.ResponseWriter, r *http.Request) {
	q, err := parseRuntimeQuery(r)
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	id, err := chain.ParseTxOutRef(r.PathValue("payoutId"))
	if err != nil {
		s.rtError(w, r, rtBad(fmt.Sprintf("Invalid payout id value %q: want TXID#INDEX (# is %%23 in a URL)", clip(r.PathValue("payoutId")))))
		return
	}
	ctx, cancel, ok := s.rtBegin(w, r, q)
	if !ok {
		return
	}
	defer cancel()
	po, at, err := s.cfg.Contracts.PayoutGet(ctx, id)
	if err == nil && po.Role == nil {
		err = contractstore.ErrNotFound // an address payout: the Runtime has none
	}
	if errors.Is(err, contractstore.ErrNotFound) {
		err = rtNotFound("Payout not found")
	}
	var addr string
	if err == nil {
		addr, err = s.payoutValidatorAddress(ctx, po)
	}
	s.rtPosition(w, at)
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	links := rtPayoutLinks{Contract: linkContract(po.ContractID), Transaction: linkTransaction(po.ContractID, po.TxID)}
	if po.Withdrawal != nil {
		links.Withdrawal = linkWithdrawal(po.Withdrawal.TxID)
	}
	rtWriteJSON(w, http.StatusOK, rtItem{Resource: rtPayoutStateJSON{rtPayoutHeaderJSON: rtPayoutHeaderOf(po), PayoutValidatorAddress: addr},
		Links: links})
}

func (s *Server) rtWithdrawalList(w http.ResponseWriter, r *http.Request) {
	q, err := parseRuntimeQuery(r)
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	p := &contractstore.WithdrawalListParams{}
	rcs, err := q.list("roleCurrency")
	for _, v := range rcs {
		b, perr := parsePolicy(v, true)
		if perr != nil {
			err = asRuntimeBad(perr, "Invalid role currency")
			break
		}
		p.RolesCurrency = append(p.RolesCurrency, b)
	}
	pr, perr := parseRange(r.Header, "withdrawalId")
	var start chain.Hash32
	if perr == nil && pr.hasVal {
		start, perr = rangeStartTx(pr, "withdrawal id")
	}
	if err == nil {
		err = perr
	}
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	ctx, cancel, ok := s.rtBegin(w, r, q)
	if !ok {
		return
	}
	defer cancel()
	p.Descending = pr.desc
	if pr.hasVal {
		wd, _, err := s.cfg.Contracts.WithdrawalGet(ctx, start)
		if errors.Is(err, contractstore.ErrNotFound) {
			err = &rangeError{"Initial withdrawal ID not found"}
		}
		if err != nil {
			s.rtError(w, r, err)
			return
		}
		p.After = wd.Seq - 1
		if pr.desc {
			p.After = wd.LastSeq + 1
		}
	}
	var at contractstore.Position
	items, err := collect(reads(pr), func(limit int) ([]contractstore.Withdrawal, bool, error) {
		p.Limit = limit
		page, err := s.cfg.Contracts.WithdrawalList(ctx, p)
		if err != nil {
			return nil, false, err
		}
		at = page.At
		if n := len(page.Withdrawals); n > 0 {
			p.After = page.Withdrawals[n-1].LastSeq
			if pr.desc {
				p.After = page.Withdrawals[n-1].Seq
			}
		}
		return page.Withdrawals, page.More, nil
	})
	if err == nil && pr.hasVal && (len(items) == 0 || items[0].TxID != start) {
		err = &rangeError{"Initial withdrawal ID not found"}
	}
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	if pr.want() == 0 {
		items = items[:0]
	}
	items = skip(items, pr)
	keys := make([]string, len(items))
	out := make([]rtItem, len(items))
	for i := range items {
		wd := &items[i]
		keys[i] = wd.TxID.String()
		links := rtWithdrawalLinks{Withdrawal: linkWithdrawal(wd.TxID)}
		if len(wd.Payouts) > 0 {
			links.Contract, links.Transactions = linkContract(wd.Payouts[0].ContractID), linkTransactions(wd.Payouts[0].ContractID)
		}
		out[i] = rtItem{Resource: rtWithdrawalHeaderOf(wd), Links: links}
	}
	s.rtPage(w, pr, at, keys, out, nil)
}

func (s *Server) rtWithdrawalGet(w http.ResponseWriter, r *http.Request) {
	q, err := parseRuntimeQuery(r)
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	tx, err := chain.ParseHash32(r.PathValue("withdrawalId"))
	if err != nil {
		s.rtError(w, r, rtBad(fmt.Sprintf("Invalid withdrawal id value %q: want 64 hex digits", clip(r.PathValue("withdrawalId")))))
		return
	}
	ctx, cancel, ok := s.rtBegin(w, r, q)
	if !ok {
		return
	}
	defer cancel()
	wd, at, err := s.cfg.Contracts.WithdrawalGet(ctx, tx)
	if errors.Is(err, contractstore.ErrNotFound) {
		err = rtNotFound("Withdrawal not found")
	}
	s.rtPosition(w, at)
	if err != nil {
		s.rtError(w, r, err)
		return
	}
	// The Runtime answers a withdrawal as it is, without links.
	rtWriteJSON(w, http.StatusOK, rtWithdrawalOf(wd))
}
