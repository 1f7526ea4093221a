package contracts

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	"github.com/marlowe-follower/follower/history/record"
)

// loadFunc reads a stored contract; contractstore.ErrNotFound when there is
// none.
type loadFunc func(ctx context.Context, id chain.TxOutRef) (*contractstore.Contract, error)

// folder applies history records, in seq order, to contract aggregates and
// collects the rows they change as one commit. A contract's aggregate
// depends only on its own records, so a folder started with no stored rows
// (load nil) over a contract's current records rebuilds it from scratch:
// the rollback path and the tests' from-scratch fold use exactly the code
// the live path uses.
type folder struct {
	load    loadFunc
	log     *zap.Logger
	entries map[chain.TxOutRef]*entry
	order   []chain.TxOutRef
	p       contractstore.CommitParams
	applied int                   // records applied
	sources map[chain.Hash32]bool // the sources in p
}

// entry is one contract touched by the fold.
type entry struct {
	row       *contractstore.Contract // nil while the contract does not exist
	wasStored bool                    // the contract existed before the fold
	wasOpen   bool
	payouts   map[chain.TxOutRef]int // payouts made in this fold: index in p.Payouts
	parties   map[string]bool        // parties added in this fold
}

func newFolder(load loadFunc, log *zap.Logger) *folder {
	return &folder{load: load, log: log, entries: map[chain.TxOutRef]*entry{}}
}

// seed declares a stored contract the fold starts without (a rebuild
// deletes it first), so that the counters account for it.
func (f *folder) seed(ref contractstore.ContractRef) {
	f.entries[ref.ID] = &entry{wasStored: true, wasOpen: ref.Open}
	f.order = append(f.order, ref.ID)
}

// entry returns the contract's entry, loading its stored row on first use.
func (f *folder) entry(ctx context.Context, id chain.TxOutRef) (*entry, error) {
	if e, ok := f.entries[id]; ok {
		return e, nil
	}
	e := &entry{}
	if f.load != nil {
		row, err := f.load(ctx, id)
		switch {
		case err == nil:
			e.row, e.wasStored, e.wasOpen = row, true, row.Status == contractstore.StatusOpen
		case !errors.Is(err, contractstore.ErrNotFound):
			return nil, fmt.Errorf("loading contract %s: %w", id, err)
		}
	}
	f.entries[id] = e
	f.order = append(f.order, id)
	return e, nil
}

// datumParts are the parts of a MarloweData (core JSON) a contract shows.
type datumParts struct {
	Contract json.RawMessage `json:"marloweContract"`
	State    json.RawMessage `json:"marloweState"`
}

// apply folds one record (not a RolledBack marker: the store handles those).
func (f *folder) apply(ctx context.Context, r *record.Record) error {
	if r.Contract == nil {
		return nil
	}
	e, err := f.entry(ctx, *r.Contract)
	if err != nil {
		return err
	}
	f.applied++
	if r.Kind != record.KindContractCreated && e.row == nil {
		f.log.Warn("a record of a contract the projection does not know; skipped",
			zap.Int64("seq", r.Seq), zap.String("kind", string(r.Kind)), zap.Stringer("contract", *r.Contract))
		return nil
	}
	switch r.Kind {
	case record.KindContractCreated:
		return f.created(e, r)
	case record.KindInputsApplied:
		return f.inputsApplied(e, r)
	case record.KindApplyInputsRejected:
		return f.rejected(e, r)
	case record.KindPayoutWithdrawn:
		return f.withdrawn(e, r)
	}
	return nil
}

// payloadOf reads a record's payload.
func payloadOf[T any](r *record.Record) (p T, err error) {
	if err = json.Unmarshal(r.Payload, &p); err != nil {
		err = fmt.Errorf("record %d: %s payload: %w", r.Seq, r.Kind, err)
	}
	return p, err
}

// step adds a transaction of a contract: one more step, its last change at r.
func (f *folder) step(e *entry, r *record.Record, tx contractstore.Transaction) {
	f.p.Transactions = append(f.p.Transactions, tx)
	e.row.Steps++
	f.touch(e, r)
}

func (f *folder) touch(e *entry, r *record.Record) {
	e.row.LastSeq, e.row.LastBlock = r.Seq, r.Block
}

func (f *folder) created(e *entry, r *record.Record) error {
	p, err := payloadOf[record.ContractCreated](r)
	if err != nil {
		return err
	}
	var d datumParts
	if err := json.Unmarshal(p.Datum, &d); err != nil {
		return fmt.Errorf("record %d: contract datum: %w", r.Seq, err)
	}
	rc, err := hex.DecodeString(p.RolesCurrency)
	if err != nil {
		return fmt.Errorf("record %d: roles currency: %w", r.Seq, err)
	}
	if e.row != nil {
		f.log.Warn("a contract created again without a rollback in between; its header is replaced",
			zap.Int64("seq", r.Seq), zap.Stringer("contract", p.ContractID))
	}
	utxo := p.ContractID
	tagsJSON, err := objectJSON(p.Tags)
	if err != nil {
		return fmt.Errorf("record %d: tags: %w", r.Seq, err)
	}
	metaJSON, err := objectJSON(p.Metadata)
	if err != nil {
		return fmt.Errorf("record %d: metadata: %w", r.Seq, err)
	}
	e.row = &contractstore.Contract{
		ID: p.ContractID, Seq: r.Seq, Block: r.Block, Version: p.Version, RolesCurrency: rc, Address: p.Address,
		Tags: tagsJSON, Metadata: metaJSON, Status: contractstore.StatusOpen,
		Body: &contractstore.ContractBody{
			InitialContract: d.Contract, InitialState: d.State, Contract: d.Contract, State: d.State,
			UTxO: &utxo, Assets: p.Assets, Payouts: []contractstore.PayoutSummary{},
		},
	}
	f.touch(e, r)
	tags := make([]string, 0, len(p.Tags))
	for t := range p.Tags {
		tags = append(tags, t)
	}
	slices.Sort(tags)
	for _, t := range tags {
		f.p.Tags = append(f.p.Tags, contractstore.ContractTag{ContractID: p.ContractID, Seq: r.Seq, Tag: t})
	}
	md, err := marlowe.ParseMarloweDataJSON(p.Datum)
	if err != nil {
		f.log.Warn("a contract's datum does not parse: its parties are not indexed", zap.Stringer("contract", p.ContractID), zap.Error(err))
		return nil
	}
	f.addParties(e, record.PartiesOf(rc, md.Contract, &md.State))
	e.row.Body.SourceID = f.reveal(e, r, md.Contract, nil)
	return nil
}

func (f *folder) addParties(e *entry, ps []record.Party) {
	if e.parties == nil {
		e.parties = map[string]bool{}
	}
	for _, p := range ps {
		cp := contractstore.ContractParty{ContractID: e.row.ID, Seq: e.row.Seq, Party: p}
		key := partyKey(&cp)
		if e.parties[key] {
			continue
		}
		e.parties[key] = true
		f.p.Parties = append(f.p.Parties, cp)
	}
}

func partyKey(p *contractstore.ContractParty) string {
	if p.Party.Address != "" {
		return "a" + p.Party.Address
	}
	return "r" + hex.EncodeToString(p.Party.RoleCurrency) + "." + hex.EncodeToString(p.Party.Role)
}

func (f *folder) inputsApplied(e *entry, r *record.Record) error {
	p, err := payloadOf[record.InputsApplied](r)
	if err != nil {
		return err
	}
	row, body := e.row, e.row.Body
	tx := contractstore.Transaction{
		ContractID: row.ID, TxID: r.TxID, Seq: r.Seq, Block: r.Block, Kind: contractstore.TxApplied,
		Input: p.Input, Closed: p.Closed, Payload: r.Payload,
	}
	if p.Output != nil {
		var d datumParts
		if err := json.Unmarshal(p.Output.Datum, &d); err != nil {
			return fmt.Errorf("record %d: output datum: %w", r.Seq, err)
		}
		out := p.Output.Ref
		tx.Output = &out
		row.Status, body.Contract, body.State, body.UTxO, body.Assets = contractstore.StatusOpen, d.Contract, d.State, &out, p.Output.Assets
		if md, err := marlowe.ParseMarloweDataJSON(p.Output.Datum); err == nil {
			f.addParties(e, record.PartiesOf(md.Params.RolesCurrency, md.Contract, &md.State))
		} else {
			f.log.Warn("a contract's new datum does not parse: its parties are not indexed", zap.Stringer("contract", row.ID), zap.Error(err))
		}
	} else {
		row.Status, body.Contract, body.State, body.UTxO = contractstore.StatusClosed, json.RawMessage("null"), json.RawMessage("null"), nil
		body.Assets = record.Assets{Tokens: map[string]map[string]json.Number{}}
	}
	if bytes.Contains(p.Inputs, []byte(`"merkleized_continuation"`)) {
		if in, err := marlowe.ParseRedeemerJSON(p.Inputs); err == nil {
			for i := range in {
				if in[i].Continuation != nil {
					f.addParties(e, record.PartiesOf(row.RolesCurrency, in[i].Continuation, nil))
					f.reveal(e, r, in[i].Continuation, in[i].ContinuationHash)
				}
			}
		}
	}
	for _, po := range p.Payouts {
		if po.Ref == nil {
			continue // an address payout not found among the outputs: shown in the step only
		}
		row := contractstore.Payout{
			ID: *po.Ref, ContractID: e.row.ID, TxID: r.TxID, Seq: r.Seq, Block: r.Block,
			Role: po.Role, Address: po.Address, Assets: po.Assets, Status: contractstore.PayoutPaid,
		}
		if po.Role != nil {
			row.RolesCurrency, row.Status = e.row.RolesCurrency, contractstore.PayoutAvailable
			if po.ValidatorAddress != nil {
				row.ValidatorAddress = *po.ValidatorAddress
			}
		}
		if e.payouts == nil {
			e.payouts = map[chain.TxOutRef]int{}
		}
		e.payouts[row.ID] = len(f.p.Payouts)
		f.p.Payouts = append(f.p.Payouts, row)
		body.Payouts = append(body.Payouts, contractstore.PayoutSummary{
			ID: row.ID, Role: row.Role, Address: row.Address, Assets: row.Assets, Status: row.Status,
		})
	}
	f.step(e, r, tx)
	return nil
}

func (f *folder) rejected(e *entry, r *record.Record) error {
	p, err := payloadOf[record.ApplyInputsRejected](r)
	if err != nil {
		return err
	}
	f.step(e, r, contractstore.Transaction{
		ContractID: e.row.ID, TxID: r.TxID, Seq: r.Seq, Block: r.Block, Kind: contractstore.TxRejected,
		Input: p.Input, Reason: p.Reason, Payload: r.Payload,
	})
	return nil
}

func (f *folder) withdrawn(e *entry, r *record.Record) error {
	p, err := payloadOf[record.PayoutWithdrawn](r)
	if err != nil {
		return err
	}
	w := contractstore.WithdrawalRef{TxID: r.TxID, Seq: r.Seq, Block: r.Block}
	for _, wp := range p.Payouts {
		if i, ok := e.payouts[wp.Ref]; ok {
			wr := w
			f.p.Payouts[i].Status, f.p.Payouts[i].Withdrawal = contractstore.PayoutWithdrawn, &wr
		} else {
			f.p.PayoutsWithdrawn = append(f.p.PayoutsWithdrawn, contractstore.PayoutWithdrawal{ID: wp.Ref, Withdrawal: w})
		}
		for i := range e.row.Body.Payouts {
			if s := &e.row.Body.Payouts[i]; s.ID == wp.Ref {
				tx := r.TxID
				s.Status, s.Withdrawal = contractstore.PayoutWithdrawn, &tx
			}
		}
	}
	f.p.Withdrawals = append(f.p.Withdrawals, contractstore.WithdrawalRow{TxID: r.TxID, ContractID: e.row.ID, Seq: r.Seq, Block: r.Block})
	f.touch(e, r)
	return nil
}

// finish returns the commit: the touched contracts' rows and the counters
// moved from prev.
func (f *folder) finish(prev contractstore.Head, at contractstore.Position) *contractstore.CommitParams {
	p := &f.p
	p.PrevSeq = prev.Seq
	p.Head = contractstore.Head{Position: at, Contracts: prev.Contracts, OpenContracts: prev.OpenContracts}
	for _, id := range f.order {
		e := f.entries[id]
		if e.wasStored {
			p.Head.Contracts--
			if e.wasOpen {
				p.Head.OpenContracts--
			}
		}
		if e.row == nil {
			continue
		}
		p.Head.Contracts++
		if e.row.Status == contractstore.StatusOpen {
			p.Head.OpenContracts++
		}
		p.Contracts = append(p.Contracts, *e.row)
	}
	return p
}

// objectJSON returns a map as a JSON object ({} for none).
func objectJSON(m map[string]json.RawMessage) (json.RawMessage, error) {
	if len(m) == 0 {
		return json.RawMessage("{}"), nil
	}
	return json.Marshal(m)
}
