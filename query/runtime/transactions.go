package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/query/internal/api"
)

func decodeStep(t *contractstore.Transaction) (*stepPayload, error) {
	var p stepPayload
	if err := json.Unmarshal(t.Payload, &p); err != nil {
		return nil, fmt.Errorf("step %s of %s: stored payload: %w", t.TxID, t.ContractID, err)
	}
	return &p, nil
}

// transactionListRequest is a step list's contract and range.
type transactionListRequest = listRequest[chain.TxOutRef, chain.Hash32]

func (v *View) transactionList() http.HandlerFunc {
	return rangedList(v, func(r *http.Request, q *api.Query) (chain.TxOutRef, error) {
		return pathRef(r, "contractId", "contract id", "bad_contract_id")
	}, "transactionId", "transaction id", rangeStartTx, v.readTransactions)
}

func (v *View) readTransactions(ctx context.Context, req *transactionListRequest) (api.Answer, error) {
	pr, id := req.pr, req.sel
	p := &contractstore.TransactionListParams{Contract: id, Descending: pr.desc, AppliedOnly: true, WithPayload: true}
	if pr.hasVal {
		t, _, err := v.env.Contracts.TransactionGet(ctx, id, req.start)
		if err == nil && t.Kind != contractstore.TxApplied {
			err = contractstore.ErrNotFound
		}
		if err != nil {
			return api.Answer{}, missing(err, &rangeError{"Initial transaction ID not found"})
		}
		p.After = pr.after(t.Seq, t.Seq)
	}
	var first firstRead
	p.Count = true
	items, err := readRange(pr, func(limit int) ([]contractstore.Transaction, bool, error) {
		p.Limit = limit
		page, err := v.env.Contracts.TransactionList(ctx, p)
		if err != nil {
			return nil, false, missing(err, notFound("Contract not found"))
		}
		return nextPage(&first, &p.Count, page.Transactions, page.More, page.Total, page.At,
			func(last *contractstore.Transaction) { p.After = last.Seq })
	}, func(t *contractstore.Transaction) bool { return t.TxID == req.start }, "Initial transaction ID not found")
	if err != nil {
		return api.Answer{}, err
	}
	out := make([]item, len(items))
	for i := range items {
		t := &items[i]
		sp, err := decodeStep(t)
		if err != nil {
			return api.Answer{}, err
		}
		out[i] = item{Resource: txHeaderOf(t, sp), Links: transactionLink{Transaction: linkTransaction(t.ContractID, t.TxID)}}
	}
	return page(pr, first.at, spanOf(items, func(t *contractstore.Transaction) string { return t.TxID.String() }), out, first.total)
}

// stepRef names a step: its contract and transaction.
type stepRef struct {
	contract chain.TxOutRef
	tx       chain.Hash32
}

func (v *View) transactionGet() http.HandlerFunc {
	return handle(v, func(r *http.Request, q *api.Query) (stepRef, error) {
		id, err := pathRef(r, "contractId", "contract id", "bad_contract_id")
		if err != nil {
			return stepRef{}, err
		}
		tx, err := pathTx(r, "transactionId", "transaction id")
		return stepRef{id, tx}, err
	}, func(ctx context.Context, s stepRef) (api.Answer, error) {
		out, links, at, err := v.transaction(ctx, s.contract, s.tx)
		if err != nil {
			return api.Answer{At: at}, err
		}
		return one(at, item{Resource: out, Links: links})
	})
}

// transaction assembles a step's details: the step, the output it spent
// (the contract's creation or the step that made it), the step that spent
// its output, and the step replayed through the semantics.
func (v *View) transaction(ctx context.Context, id chain.TxOutRef, tx chain.Hash32) (*txJSON, *txLinks, contractstore.Position, error) {
	t, at, err := v.env.Contracts.TransactionGet(ctx, id, tx)
	if err == nil && t.Kind != contractstore.TxApplied {
		err = contractstore.ErrNotFound
	}
	if err != nil {
		return nil, nil, at, missing(err, notFound("Transaction not found"))
	}
	sp, err := decodeStep(t)
	if err != nil {
		return nil, nil, at, err
	}
	out := &txJSON{txHeaderJSON: txHeaderOf(t, sp), InputUTxO: t.Input, Inputs: api.RawOr(sp.Inputs, "[]"),
		OutputUTxO: t.Output, Assets: api.Assets(record.Assets{}), Payouts: []payoutJSON{}, Interval: sp.Interval}
	links := &txLinks{}
	if err := v.stepInput(ctx, id, t, out, links); err != nil {
		return nil, nil, at, err
	}
	if sp.Output != nil {
		var d datumParts
		if err := json.Unmarshal(sp.Output.Datum, &d); err != nil {
			return nil, nil, at, fmt.Errorf("step %s: output datum: %w", t.TxID, err)
		}
		out.OutputContract, out.OutputState, out.Assets = d.contract(), d.state(), api.Assets(sp.Output.Assets)
		next, _, err := v.env.Contracts.TransactionSpending(ctx, id, sp.Output.Ref)
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
			out.Payouts = append(out.Payouts, payoutJSON{PayoutID: *po.Ref, Role: *po.Role, Assets: api.Assets(po.Assets)})
		}
	}
	iv := sp.Interval
	if iv.InvalidBefore == nil || iv.InvalidHereafter == nil || iv.FromMillis == nil || iv.ToMillis == nil {
		return nil, nil, at, fmt.Errorf("step %s: a Marlowe step without a bounded validity interval", t.TxID)
	}
	out.InvalidBefore = utcTime(v.cfg.Slots.SlotStart(*iv.InvalidBefore))
	out.InvalidHereafter = utcTime(v.cfg.Slots.SlotStart(*iv.InvalidHereafter))
	out.ReconstructedSemanticInput, out.ReconstructedSemanticOutput, err = reconstruct(out.InputContract, out.InputState, sp)
	if err != nil {
		return nil, nil, at, fmt.Errorf("step %s: %w", t.TxID, err)
	}
	return out, links, at, nil
}

// stepInput sets the contract and state a step started from: the
// contract's initial ones, or the output of the step before.
func (v *View) stepInput(ctx context.Context, id chain.TxOutRef, t *contractstore.Transaction, out *txJSON, links *txLinks) error {
	if t.Input == id {
		c, _, err := v.env.Contracts.ContractGet(ctx, id)
		if err != nil {
			return err
		}
		if c.Body == nil {
			return fmt.Errorf("contract %s: stored without its body", id)
		}
		out.InputContract, out.InputState = api.RawOr(c.Body.InitialContract, "null"), api.RawOr(c.Body.InitialState, "null")
		return nil
	}
	prev, _, err := v.env.Contracts.TransactionProducing(ctx, id, t.Input)
	if err != nil {
		return fmt.Errorf("the step that made %s: %w", t.Input, err)
	}
	pp, err := decodeStep(prev)
	if err != nil {
		return err
	}
	if pp.Output == nil {
		return fmt.Errorf("step %s: no output stored", prev.TxID)
	}
	var d datumParts
	if err := json.Unmarshal(pp.Output.Datum, &d); err != nil {
		return fmt.Errorf("step %s: output datum: %w", prev.TxID, err)
	}
	out.InputContract, out.InputState = d.contract(), d.state()
	links.Previous = linkTransaction(id, t.Input.TxID)
	return nil
}

// datumParts are the parts of a MarloweData (core JSON) a step shows.
type datumParts struct {
	Contract json.RawMessage `json:"marloweContract"`
	State    json.RawMessage `json:"marloweState"`
}

func (d *datumParts) contract() json.RawMessage { return nonNull(d.Contract) }
func (d *datumParts) state() json.RawMessage    { return nonNull(d.State) }
