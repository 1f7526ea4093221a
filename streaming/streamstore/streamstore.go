// Package streamstore keeps the durable named streams of the streaming API:
// each stream's definition (filter, mode, batching) and its acknowledged
// cursor, so that a stream resumes after its last acknowledgement across
// connections and server restarts. Store is the storage interface; its
// implementation is sqlstreams, over both databases of the storage layer
// (a streams.sqlite file in the data directory, or ws_ tables in the
// history's PostgreSQL database). streamstoretest is the conformance suite
// it passes on both.
package streamstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

// Sentinel errors of every Store.
var (
	// ErrNotFound: no stream has that name (the storage layer's
	// record.ErrNotFound).
	ErrNotFound = record.ErrNotFound
	// ErrExists: StreamCreate of a name in use.
	ErrExists = errors.New("stream already exists")
	// ErrStale: StreamAck with a batch number not above the stored one.
	ErrStale = errors.New("acknowledgement older than the stored one")
	// ErrLeased: another process holds the stream's round-trip lease
	// (StreamLease), or the lease an acknowledgement was made under is no
	// longer the acknowledging process's (StreamAck with a Holder).
	ErrLeased = errors.New("another process has a batch of this durable stream in flight")
	// ErrClosed: the store was closed (the storage layer's
	// record.ErrBackendClosed).
	ErrClosed = record.ErrBackendClosed
	// ErrSchemaTooNew: the database was migrated by a newer binary (the one
	// sentinel of the storage layer, record.ErrSchemaTooNew).
	ErrSchemaTooNew = record.ErrSchemaTooNew
)

// Stream is a durable stream as stored.
type Stream struct {
	// Name identifies the stream (protocol.ValidDurableName).
	Name string
	// Owner is the name of the credential that created the stream; only
	// it (or an admin) may use the stream. "" on an open server.
	Owner string
	// Filter selects the stream's records.
	Filter protocol.Filter
	// Mode is ack or broadcast.
	Mode protocol.Mode
	// BatchSize and BatchTimeout shape the stream's batches.
	BatchSize    int
	BatchTimeout time.Duration
	// Cursor is the acknowledged position (a history cursor's text): the
	// stream resumes right after it.
	Cursor string
	// Batch is the number of the last batch acknowledged (in broadcast
	// mode: sent); the stream numbers its next batches after it.
	Batch int64
	// Records counts the records acknowledged (sent in broadcast mode).
	Records int64
	// CreatedAt and UpdatedAt are set by the store (UTC, microseconds).
	CreatedAt time.Time
	UpdatedAt time.Time
}

// StreamAckParams move a stream's cursor forward.
type StreamAckParams struct {
	Name   string
	Cursor string
	// Batch must be greater than the stored batch number (else ErrStale).
	Batch int64
	// Records is added to the stream's record count.
	Records int64
	// Holder, when set, is the process that acknowledges under its
	// round-trip lease (StreamLease): the cursor moves only while Holder
	// holds the lease (else ErrLeased and nothing changes), and the ack
	// ends the lease, the round trip being over.
	Holder string
}

// StreamLeaseParams name a durable stream's round-trip lease: several
// processes (readers on one database) may serve connections of one stream,
// and only the lease holder may have a batch of it in flight.
type StreamLeaseParams struct {
	Name string
	// Holder names the process (NewHolder): unique among the processes on
	// the database, the same for all of one process's leases.
	Holder string
	// TTL: the lease lapses this long after it was taken or last renewed
	// (DefaultLeaseTTL when 0), so that a process that died with a batch
	// in flight holds the stream no longer than that.
	TTL time.Duration
}

// DefaultLeaseTTL is a lease's life without renewal. A holder renews its
// lease every third of it while its batch is in flight.
const DefaultLeaseTTL = 10 * time.Second

// EffectiveTTL is p.TTL or DefaultLeaseTTL.
func (p *StreamLeaseParams) EffectiveTTL() time.Duration {
	if p.TTL <= 0 {
		return DefaultLeaseTTL
	}
	return p.TTL
}

// NewHolder returns a holder name for this process: the host, the process
// id and a random part (a restarted process on the same host with the same
// id is another holder).
func NewHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// StreamListParams select a page of streams, ordered by name.
type StreamListParams struct {
	// After: only names greater than this one.
	After string
	// Limit: at most this many (0 or above MaxList: MaxList).
	Limit int
	// Owner, when not nil: only the streams of that owner.
	Owner *string
}

// MaxList caps a StreamList page.
const MaxList = 1000

// Store keeps durable streams. Implementations are safe for concurrent use.
type Store interface {
	// StreamCreate stores a new stream (CreatedAt and UpdatedAt are set);
	// ErrExists when the name is in use.
	StreamCreate(ctx context.Context, s *Stream) error
	// StreamGet returns a stream; ErrNotFound when there is none.
	StreamGet(ctx context.Context, name string) (*Stream, error)
	// StreamList returns streams in name order.
	StreamList(ctx context.Context, p *StreamListParams) ([]Stream, error)
	// StreamAck stores an acknowledged cursor; ErrNotFound when the stream
	// is gone, ErrStale when p.Batch is not above the stored batch number.
	StreamAck(ctx context.Context, p *StreamAckParams) error
	// StreamDelete removes a stream; ErrNotFound when there is none.
	StreamDelete(ctx context.Context, name string) error
	// StreamLease takes, or renews, the stream's round-trip lease for
	// p.Holder and returns the stream as stored: its acknowledged cursor
	// and batch, which another holder may have moved since this process
	// last looked. ErrLeased when another holder's lease has not lapsed, or
	// when p.Holder had the last round trip and another process asked for
	// the stream while it was held (the holders take turns); ErrNotFound
	// when the stream is gone. The database's clock times the leases.
	StreamLease(ctx context.Context, p *StreamLeaseParams) (*Stream, error)
	// StreamRelease gives p.Holder's lease up (a round trip ended without
	// an acknowledgement: its connection closed, a nack); nothing when
	// p.Holder does not hold it.
	StreamRelease(ctx context.Context, p *StreamLeaseParams) error
	// HistoryGet returns the identity of the history log the streams were
	// last checked against; ErrNotFound when none was recorded.
	HistoryGet(ctx context.Context) (*HistoryIdentity, error)
	// HistorySet records the history log's identity (UpdatedAt is set).
	HistorySet(ctx context.Context, h *HistoryIdentity) error
	// Close releases the store's resources.
	Close() error
}

// HistoryIdentity names the history log the streams' cursors point into:
// its network, its first record's block and the head seen when it was
// recorded (the seq and the block hash of the record at that seq). The same
// history keeps these forever: records are only appended.
type HistoryIdentity struct {
	NetworkMagic uint32
	// FirstSlot and FirstHash are the block of seq 1 (zero when the log was
	// empty).
	FirstSlot uint64
	FirstHash chain.Hash32
	// HeadSeq is the head seen (0: an empty log); HeadHash the block hash of
	// the record at HeadSeq.
	HeadSeq  int64
	HeadHash chain.Hash32
	// UpdatedAt is set by the store (UTC, microseconds).
	UpdatedAt time.Time
}

// EffectiveLimit returns the page size a StreamList with p uses.
func (p *StreamListParams) EffectiveLimit() int {
	if p == nil || p.Limit <= 0 || p.Limit > MaxList {
		return MaxList
	}
	return p.Limit
}
