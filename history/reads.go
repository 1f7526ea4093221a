package history

import (
	"context"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history/record"
)

// The history store owns the log's reads as well as its writes: readers
// (the query API, the contract projection's rebuilds, subscriptions'
// catch-up) ask the Handle, and nothing outside this package holds the
// storage backend. The reads run on the backend's read pool, concurrently,
// never through the store's mailbox, so they are never queued behind a
// commit; and they see only what is committed, so a record a subscriber
// has received is in every read issued after it (the store pushes a batch
// to live subscribers only once its commit returned).

// RecordList reads records in seq order (see record.RecordListParams).
func (h *Handle) RecordList(ctx context.Context, p *record.RecordListParams) ([]record.Record, error) {
	return h.backend.RecordList(ctx, p)
}

// RecordGet reads one record by seq; record.ErrNotFound when there is none.
func (h *Handle) RecordGet(ctx context.Context, seq int64) (*record.Record, error) {
	return h.backend.RecordGet(ctx, seq)
}

// ContractGet returns a contract's index entry; record.ErrNotFound when the
// contract was never created.
func (h *Handle) ContractGet(ctx context.Context, id chain.TxOutRef) (*record.ContractIndex, error) {
	return h.backend.ContractGet(ctx, id)
}
