// Package history keeps the one ordered, rollback-aware log of Marlowe
// activity. The processor actor (history/processor) turns Marlowe chain
// events into steps of records; the Store actor, the single writer, gives
// each record its sequence number, commits it together with the chain
// checkpoint and the Marlowe UTxO changes, and pushes committed records to
// live subscribers. Reads (queries, subscription catch-up) go straight to
// the storage backend, concurrently.
//
// The log's plain types (records, kinds, payloads, cursors, filters,
// contract index entries, storage sentinels) are in history/record, which
// clients import without the actors and the ledger.
package history
