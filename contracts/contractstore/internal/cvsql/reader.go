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
	One runner
	// Tx runs reads in one read transaction: one snapshot.
	Tx runner
	// Lateral: the database has LATERAL joins (PostgreSQL), so a contract
	// page and the cursor are read in one statement (with a total only from
	// the counters: a page that must be counted is read in a transaction).
	Lateral bool
	// Counts keeps the lists' counts for the newest seq (nil: none kept).
	Counts *Counts
}

// runner is a Reader's One or Tx.
type runner = func(ctx context.Context, op string, fn func(Querier) error) error

// read runs fn with run and returns what it read.
func read[T any](ctx context.Context, run runner, op string, fn func(Querier) (T, error)) (v T, err error) {
	err = run(ctx, op, func(q Querier) error {
		v, err = fn(q)
		return err
	})
	return v, err
}

// readAt runs fn with run and returns what it read and the position it was
// read at.
func readAt[T any](ctx context.Context, run runner, op string, fn func(Querier) (T, contractstore.Position, error)) (v T, at contractstore.Position, err error) {
	err = run(ctx, op, func(q Querier) error {
		v, at, err = fn(q)
		return err
	})
	return v, at, err
}

// HeadGet reads the committed cursor and counters.
func (s *Reader) HeadGet(ctx context.Context) (contractstore.Head, error) {
	return read(ctx, s.One, "head", func(q Querier) (contractstore.Head, error) {
		return HeadGet(ctx, q)
	})
}

// ContractsAfterSlot lists the contracts last changed after slot.
func (s *Reader) ContractsAfterSlot(ctx context.Context, slot uint64) ([]contractstore.ContractRef, error) {
	return read(ctx, s.One, "contracts after slot", func(q Querier) ([]contractstore.ContractRef, error) {
		return ContractsAfterSlot(ctx, q, slot)
	})
}

// ContractGet reads one contract (one statement).
func (s *Reader) ContractGet(ctx context.Context, id chain.TxOutRef) (*contractstore.Contract, contractstore.Position, error) {
	return readAt(ctx, s.One, "contract get", func(q Querier) (*contractstore.Contract, contractstore.Position, error) {
		return ContractGet(ctx, q, id)
	})
}

// ContractList reads a page of contracts (in one statement with Lateral).
func (s *Reader) ContractList(ctx context.Context, p *contractstore.ContractListParams) (*contractstore.ContractPage, error) {
	if s.Lateral && (!p.Count || countersAnswer(&p.Filter)) {
		return read(ctx, s.One, "contract list", func(q Querier) (*contractstore.ContractPage, error) {
			return ContractListLateral(ctx, q, p)
		})
	}
	return read(ctx, s.Tx, "contract list", func(q Querier) (*contractstore.ContractPage, error) {
		return ContractList(ctx, q, s.Counts, p)
	})
}

// TransactionList reads a page of a contract's steps.
func (s *Reader) TransactionList(ctx context.Context, p *contractstore.TransactionListParams) (*contractstore.TransactionPage, error) {
	return read(ctx, s.Tx, "transaction list", func(q Querier) (*contractstore.TransactionPage, error) {
		return TransactionList(ctx, q, s.Counts, p)
	})
}

// TransactionGet reads one step (one statement).
func (s *Reader) TransactionGet(ctx context.Context, contract chain.TxOutRef, tx chain.Hash32) (*contractstore.Transaction, contractstore.Position, error) {
	return readAt(ctx, s.One, "transaction get", func(q Querier) (*contractstore.Transaction, contractstore.Position, error) {
		return TransactionGet(ctx, q, contract, tx)
	})
}

// TransactionProducing reads the step that made a contract output (one statement).
func (s *Reader) TransactionProducing(ctx context.Context, contract, out chain.TxOutRef) (*contractstore.Transaction, contractstore.Position, error) {
	return readAt(ctx, s.One, "transaction producing", func(q Querier) (*contractstore.Transaction, contractstore.Position, error) {
		return TransactionProducing(ctx, q, contract, out)
	})
}

// TransactionOfTx reads the step a transaction made (one statement).
func (s *Reader) TransactionOfTx(ctx context.Context, tx chain.Hash32) (*contractstore.Transaction, contractstore.Position, error) {
	return readAt(ctx, s.One, "transaction of tx", func(q Querier) (*contractstore.Transaction, contractstore.Position, error) {
		return TransactionOfTx(ctx, q, tx)
	})
}

// TransactionSpending reads the step that spent a contract output (one statement).
func (s *Reader) TransactionSpending(ctx context.Context, contract, in chain.TxOutRef) (*contractstore.Transaction, contractstore.Position, error) {
	return readAt(ctx, s.One, "transaction spending", func(q Querier) (*contractstore.Transaction, contractstore.Position, error) {
		return TransactionSpending(ctx, q, contract, in)
	})
}

// PayoutList reads a page of payouts.
func (s *Reader) PayoutList(ctx context.Context, p *contractstore.PayoutListParams) (*contractstore.PayoutPage, error) {
	return read(ctx, s.Tx, "payout list", func(q Querier) (*contractstore.PayoutPage, error) {
		return PayoutList(ctx, q, s.Counts, p)
	})
}

// PayoutGet reads one payout (one statement).
func (s *Reader) PayoutGet(ctx context.Context, id chain.TxOutRef) (*contractstore.Payout, contractstore.Position, error) {
	return readAt(ctx, s.One, "payout get", func(q Querier) (*contractstore.Payout, contractstore.Position, error) {
		return PayoutGet(ctx, q, id)
	})
}

// WithdrawalList reads a page of withdrawals.
func (s *Reader) WithdrawalList(ctx context.Context, p *contractstore.WithdrawalListParams) (*contractstore.WithdrawalPage, error) {
	return read(ctx, s.Tx, "withdrawal list", func(q Querier) (*contractstore.WithdrawalPage, error) {
		return WithdrawalList(ctx, q, s.Counts, p)
	})
}

// WithdrawalGet reads one withdrawal.
func (s *Reader) WithdrawalGet(ctx context.Context, tx chain.Hash32) (*contractstore.Withdrawal, contractstore.Position, error) {
	return readAt(ctx, s.Tx, "withdrawal get", func(q Querier) (*contractstore.Withdrawal, contractstore.Position, error) {
		return WithdrawalGet(ctx, q, tx)
	})
}

// SourceGet reads a contract source (one read transaction).
func (s *Reader) SourceGet(ctx context.Context, hash chain.Hash32) (*contractstore.SourceInfo, contractstore.Position, error) {
	return readAt(ctx, s.Tx, "source get", func(q Querier) (*contractstore.SourceInfo, contractstore.Position, error) {
		return SourceGet(ctx, q, hash)
	})
}

// SourceClosure reads what a contract source reaches (one read transaction).
func (s *Reader) SourceClosure(ctx context.Context, hash chain.Hash32, withContracts bool) (*contractstore.SourceClosure, contractstore.Position, error) {
	return readAt(ctx, s.Tx, "source closure", func(q Querier) (*contractstore.SourceClosure, contractstore.Position, error) {
		return SourceClosure(ctx, q, hash, withContracts)
	})
}
