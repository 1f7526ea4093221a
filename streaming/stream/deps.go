// Package stream is the streaming server's stream actor: an ephemeral
// subscription or a durable stream, holding the round trip of its batches
// with the connection actors it is attached to. It talks to the server and
// connection actors only through streaming/wire messages and PIDs, and is
// built from a Deps the server fills: it never reaches back into the
// server.
package stream

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/catchup"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamstore"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// Deps is what every stream of a server shares: the configuration values
// it reads, its metrics, the stores it reads and writes, the encoders and
// the logger. The server fills it once; the streams only read it.
type Deps struct {
	Config  Config
	Metrics *Metrics
	// Store keeps the durable streams' cursors and leases (nil: no
	// durable streams).
	Store   streamstore.Store
	History *history.Handle
	CatchUp *catchup.Cache // the pages of the log streams catch up through
	Tips    *wire.Tips
	Records *wire.RecordCache // the JSON of the records near the head
	Log     *zap.Logger
	// Workers counts the streams' database workers and catch-up reads;
	// the server waits for their last jobs (a stopping stream's lease
	// release) as it stops. Reads is the catch-up reads' context, which
	// the server ends as it stops.
	Workers *sync.WaitGroup
	Reads   context.Context
}

// Config is what a stream reads of the server's configuration (see
// streaming.Config).
type Config struct {
	// AckTimeout, when not zero, ends a round trip whose batch is not
	// acknowledged in time.
	AckTimeout time.Duration
	// RetryDelay is the wait after a failed read of the history, and the
	// longest wait between stores of an acknowledgement.
	RetryDelay time.Duration
	// LeaseHolder, when not empty, names this process among several that
	// serve the durable streams of one database: a round trip of a
	// durable stream in ack mode is leased. LeaseTTL is a lease's life
	// without renewal, LeaseRetry the wait before a lease refused is asked
	// for again (DefaultLeaseRetry when 0).
	LeaseHolder          string
	LeaseTTL, LeaseRetry time.Duration
}

// Metrics are the streams' counters (registered by the server).
type Metrics struct {
	BatchesSent   *prometheus.CounterVec // by delivery mode
	RecordsSent   prometheus.Counter
	Acks          prometheus.Counter
	Nacks         prometheus.Counter
	Redeliveries  prometheus.Counter
	StaleAcks     prometheus.Counter
	AckTimeouts   prometheus.Counter
	StoreFailures prometheus.Counter
	LeaseWaits    prometheus.Counter
	LeasesLost    prometheus.Counter
}

// Spec is a stream as it starts: its name, kind, filter and batching, and
// where it stands.
type Spec struct {
	Name string
	// Owner is the name of the credential a durable stream belongs to
	// ("" when it was created on an open server).
	Owner        string
	Durable      bool
	Mode         protocol.Mode
	Filter       record.Filter
	Wire         protocol.Filter // the filter as the client gave it (canonical)
	BatchSize    int
	BatchTimeout time.Duration
	// Acked is the acknowledged cursor: the stream delivers what follows.
	Acked record.Cursor
	// Batch and Records are a stored stream's last batch number and its
	// count of records acknowledged.
	Batch, Records int64
}

// New makes a stream actor; spawn it (its props' producer returns it) as
// a child of the server actor.
func New(d *Deps, s Spec) *Actor {
	st := &Actor{d: d, name: s.Name, owner: s.Owner, durable: s.Durable, mode: s.Mode, filter: s.Filter, wire: s.Wire,
		batchSize: s.BatchSize, batchTimeout: s.BatchTimeout, acked: s.Acked, delivered: s.Acked, storedAt: s.Acked,
		batchNo: s.Batch, records: s.Records, stats: &atomic.Pointer[Stats]{}}
	st.stats.Store(&Stats{Acked: s.Acked})
	st.behavior = actor.NewBehavior()
	st.behavior.Become(st.running)
	return st
}

// Stats returns where the stream publishes its state.
func (st *Actor) Stats() *atomic.Pointer[Stats] { return st.stats }
