package cvsql

import (
	"context"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
)

// Reader is the read half of contractstore.Backend on top of a backend's
// two ways to run statements; a backend embeds it.
type Reader struct {
	// One runs a single-statement read (on the pool).
	One func(ctx context.Context, op string, fn func(Querier) error) error
	// Tx runs reads in one read transaction: one snapshot.
	Tx func(ctx context.Context, op string, fn func(Querier) error) error
	// Lateral: the database has LATERAL joins (PostgreSQL), so a contract
	// page and the cursor are read in one statement (with a total only from
	// the counters: a page that must be counted is read in a transaction).
	Lateral bool
	// Counts keeps the lists' counts for the newest seq (nil: none kept).
	Counts *Counts
}

// HeadGet reads the committed cursor and counters.
func (s *Reader) HeadGet(ctx context.Context) (h contractstore.Head, err error) {
	err = s.One(ctx, "head", func(q Querier) error {
		h, err = HeadGet(ctx, q)
		return err
	})
	return h, err
}

// ContractsAfterSlot lists the contracts last changed after slot.
func (s *Reader) ContractsAfterSlot(ctx context.Context, slot uint64) (out []contractstore.ContractRef, err error) {
	err = s.One(ctx, "contracts after slot", func(q Querier) error {
		out, err = ContractsAfterSlot(ctx, q, slot)
		return err
	})
	return out, err
}

// ContractGet reads one contract (one statement).
func (s *Reader) ContractGet(ctx context.Context, id chain.TxOutRef) (c *contractstore.Contract, at contractstore.Position, err error) {
	err = s.One(ctx, "contract get", func(q Querier) error {
		c, at, err = ContractGet(ctx, q, id)
		return err
	})
	return c, at, err
}

// ContractList reads a page of contracts (in one statement with Lateral).
func (s *Reader) ContractList(ctx context.Context, p *contractstore.ContractListParams) (page *contractstore.ContractPage, err error) {
	if s.Lateral && (!p.Count || countersAnswer(&p.Filter)) {
		err = s.One(ctx, "contract list", func(q Querier) error {
			page, err = ContractListLateral(ctx, q, p)
			return err
		})
		return page, err
	}
	err = s.Tx(ctx, "contract list", func(q Querier) error {
		page, err = ContractList(ctx, q, s.Counts, p)
		return err
	})
	return page, err
}

// TransactionList reads a page of a contract's steps.
func (s *Reader) TransactionList(ctx context.Context, p *contractstore.TransactionListParams) (page *contractstore.TransactionPage, err error) {
	err = s.Tx(ctx, "transaction list", func(q Querier) error {
		page, err = TransactionList(ctx, q, s.Counts, p)
		return err
	})
	return page, err
}

// TransactionGet reads one step (one statement).
func (s *Reader) TransactionGet(ctx context.Context, contract chain.TxOutRef, tx chain.Hash32) (t *contractstore.Transaction, at contractstore.Position, err error) {
	err = s.One(ctx, "transaction get", func(q Querier) error {
		t, at, err = TransactionGet(ctx, q, contract, tx)
		return err
	})
	return t, at, err
}

// TransactionProducing reads the step that made a contract output (one statement).
func (s *Reader) TransactionProducing(ctx context.Context, contract, out chain.TxOutRef) (t *contractstore.Transaction, at contractstore.Position, err error) {
	err = s.One(ctx, "transaction producing", func(q Querier) error {
		t, at, err = TransactionProducing(ctx, q, contract, out)
		return err
	})
	return t, at, err
}

// TransactionOfTx reads the step a transaction made (one statement).
func (s *Reader) TransactionOfTx(ctx context.Context, tx chain.Hash32) (t *contractstore.Transaction, at contractstore.Position, err error) {
	err = s.One(ctx, "transaction of tx", func(q Querier) error {
		t, at, err = TransactionOfTx(ctx, q, tx)
		return err
	})
	return t, at, err
}

// TransactionSpending reads the step that spent a contract output (one statement).
func (s *Reader) TransactionSpending(ctx context.Context, contract, in chain.TxOutRef) (t *contractstore.Transaction, at contractstore.Position, err error) {
	err = s.One(ctx, "transaction spending", func(q Querier) error {
		t, at, err = TransactionSpending(ctx, q, contract, in)
		return err
	})
	return t, at, err
}

// PayoutList reads a page of payouts.
func (s *Reader) PayoutList(ctx context.Context, p *contractstore.PayoutListParams) (page *contractstore.PayoutPage, err error) {
	err = s.Tx(ctx, "payout list", func(q Querier) error {
		page, err = PayoutList(ctx, q, s.Counts, p)
		return err
	})
	return page, err
}

// PayoutGet reads one payout (one statement).
func (s *Reader) PayoutGet(ctx context.Context, id chain.TxOutRef) (p *contractstore.Payout, at contractstore.Position, err error) {
	err = s.One(ctx, "payout get", func(q Querier) error {
		p, at, err = PayoutGet(ctx, q, id)
		return err
	})
	return p, at, err
}

// WithdrawalList reads a page of withdrawals.
func (s *Reader) WithdrawalList(ctx context.Context, p *contractstore.WithdrawalListParams) (page *contractstore.WithdrawalPage, err error) {
	err = s.Tx(ctx, "withdrawal list", func(q Querier) error {
		page, err = WithdrawalList(ctx, q, s.Counts, p)
		return err
	})
	return page, err
}

// WithdrawalGet reads one withdrawal.
func (s *Reader) WithdrawalGet(ctx context.Context, tx chain.Hash32) (w *contractstore.Withdrawal, at contractstore.Position, err error) {
	err = s.Tx(ctx, "withdrawal get", func(q Querier) error {
		w, at, err = WithdrawalGet(ctx, q, tx)
		return err
	})
	return w, at, err
}

// SourceGet reads a contract source (one read transaction).
func (s *Reader) SourceGet(ctx context.Context, hash chain.Hash32) (src *contractstore.SourceInfo, at contractstore.Position, err error) {
	err = s.Tx(ctx, "source get", func(q Querier) error {
		src, at, err = SourceGet(ctx, q, hash)
		return err
	})
	return src, at, err
}

// SourceClosure reads what a contract source reaches (one read transaction).
func (s *Reader) SourceClosure(ctx context.Context, hash chain.Hash32, withContracts bool) (c *contractstore.SourceClosure, at contractstore.Position, err error) {
	err = s.Tx(ctx, "source closure", func(q Querier) error {
		c, at, err = SourceClosure(ctx, q, hash, withContracts)
		return err
	})
	return c, at, err
}
