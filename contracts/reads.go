package contracts

import (
	"context"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
)

// The projection owns its reads as well as its writes: the query API asks
// the Store, and nothing outside this package holds the contract store's
// backend. The reads run on the backend's read pool, concurrently, never
// through the projection's mailbox; each returns the position it reflects,
// read in the same snapshot as its rows.

// Ping checks that the contract store answers.
func (s *Store) Ping(ctx context.Context) error { return s.cfg.Backend.Ping(ctx) }

// ContractGet reads one contract with its body.
func (s *Store) ContractGet(ctx context.Context, id chain.TxOutRef) (*contractstore.Contract, contractstore.Position, error) {
	return s.cfg.Backend.ContractGet(ctx, id)
}

// ContractList reads a page of contract headers.
func (s *Store) ContractList(ctx context.Context, p *contractstore.ContractListParams) (*contractstore.ContractPage, error) {
	return s.cfg.Backend.ContractList(ctx, p)
}

// TransactionList reads a page of one contract's steps.
func (s *Store) TransactionList(ctx context.Context, p *contractstore.TransactionListParams) (*contractstore.TransactionPage, error) {
	return s.cfg.Backend.TransactionList(ctx, p)
}

// TransactionGet reads one step of a contract with its payload.
func (s *Store) TransactionGet(ctx context.Context, contract chain.TxOutRef, tx chain.Hash32) (*contractstore.Transaction, contractstore.Position, error) {
	return s.cfg.Backend.TransactionGet(ctx, contract, tx)
}

// TransactionProducing reads the step of a contract that made an output.
func (s *Store) TransactionProducing(ctx context.Context, contract, out chain.TxOutRef) (*contractstore.Transaction, contractstore.Position, error) {
	return s.cfg.Backend.TransactionProducing(ctx, contract, out)
}

// TransactionSpending reads the applied step of a contract that spent an output.
func (s *Store) TransactionSpending(ctx context.Context, contract, in chain.TxOutRef) (*contractstore.Transaction, contractstore.Position, error) {
	return s.cfg.Backend.TransactionSpending(ctx, contract, in)
}

// TransactionOfTx reads the step a transaction made, of whichever contract.
func (s *Store) TransactionOfTx(ctx context.Context, tx chain.Hash32) (*contractstore.Transaction, contractstore.Position, error) {
	return s.cfg.Backend.TransactionOfTx(ctx, tx)
}

// PayoutList reads a page of payouts.
func (s *Store) PayoutList(ctx context.Context, p *contractstore.PayoutListParams) (*contractstore.PayoutPage, error) {
	return s.cfg.Backend.PayoutList(ctx, p)
}

// PayoutGet reads one payout.
func (s *Store) PayoutGet(ctx context.Context, id chain.TxOutRef) (*contractstore.Payout, contractstore.Position, error) {
	return s.cfg.Backend.PayoutGet(ctx, id)
}

// WithdrawalList reads a page of withdrawals.
func (s *Store) WithdrawalList(ctx context.Context, p *contractstore.WithdrawalListParams) (*contractstore.WithdrawalPage, error) {
	return s.cfg.Backend.WithdrawalList(ctx, p)
}

// WithdrawalGet reads the withdrawal a transaction made.
func (s *Store) WithdrawalGet(ctx context.Context, tx chain.Hash32) (*contractstore.Withdrawal, contractstore.Position, error) {
	return s.cfg.Backend.WithdrawalGet(ctx, tx)
}

// SourceGet reads a contract source the chain revealed.
func (s *Store) SourceGet(ctx context.Context, hash chain.Hash32) (*contractstore.SourceInfo, contractstore.Position, error) {
	return s.cfg.Backend.SourceGet(ctx, hash)
}

// SourceClosure reads what a contract source reaches, as far as the chain
// revealed it.
func (s *Store) SourceClosure(ctx context.Context, hash chain.Hash32, withContracts bool) (*contractstore.SourceClosure, contractstore.Position, error) {
	return s.cfg.Backend.SourceClosure(ctx, hash, withContracts)
}
