package query

import (
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// Status is the service's state as /status shows it; Config.Status
// provides it (from chainsync.Progress, history.StoreStats and the
// projection).
type Status struct {
	Network      string            // "mainnet", "preprod", "preview", "devnet" or the magic
	NetworkMagic uint32            //
	Version      string            // the binary's version
	Connected    bool              // the follower is connected to the node
	NodeTip      chain.Tip         // the node's tip
	Follower     chain.BlockHeader // the newest block followed
	SyncProgress float64           // followed slot over the tip's slot, 0..1
	BlocksBehind uint64            // blocks between the followed point and the tip
	HistorySeq   int64             // the newest committed history seq
	// ProjectionError is the projection's newest failure ("" when healthy).
	ProjectionError string

	// Committed is the newest block whose records and checkpoint the
	// history store has committed (Follower is what was received: up to
	// two batches ahead).
	Committed chain.BlockHeader
	// NodeError is why the follower is not connected: its newest
	// connection error ("" while connected).
	NodeError string
	// Handshake is set when the newest attempt failed in the handshake.
	Handshake *HandshakeFailure
	// Waiting is set while the node's tip is behind the follower's point.
	Waiting *NodeWait
	// Diverged is set once following stopped for the operator.
	Diverged *Divergence
	// CommitError is the newest commit failure while commits fail ("" when
	// the last commit succeeded), CommitFailingSince when they started
	// failing and CommitFailures how many failed since the start.
	CommitError        string
	CommitFailingSince time.Time
	CommitFailures     uint64

	// Role is the process's role (all, writer or reader; "" is all).
	Role string
	// WriterLease is set on PostgreSQL: the writer lease, this process's
	// own (a writer) or as this process last read it (a reader, a
	// standby).
	WriterLease *WriterLease
	// Reader is set in a reader process (role reader): it follows the
	// writer's database instead of the node, and NodeTip, Follower and
	// Committed are the writer's progress as the database holds it.
	Reader *ReaderStatus
}

// ReaderStatus is a reader process's position beside the writer's.
type ReaderStatus struct {
	// Head is the newest seq this process has delivered (HistorySeq);
	// WriterHead the writer's committed head as last noticed or read.
	Head, WriterHead int64
	// Listening is set while a connection listens for the writer's commit
	// notices (without one the reader polls).
	Listening bool
	// Notices and Polls count the commit notices received and the timed
	// polls of the writer's progress.
	Notices, Polls uint64
	// ReadError is the newest failed read of the database while reads
	// fail ("" when the last one succeeded).
	ReadError string
	// Replica is set when records are read from a streaming replica.
	Replica *ReplicaStatus
}

// ReplicaStatus is a replica's replay position.
type ReplicaStatus struct {
	// Head is the newest seq the replica has replayed.
	Head int64
	// LagSeqs is how many records the replica is behind the writer's head;
	// LagBytes how many bytes of write-ahead log it has still to replay
	// (-1 when unknown).
	LagSeqs, LagBytes int64
}

// WriterLease is the writer lease (a row in the database the writing
// process renews; storage.Lease) as this process sees it.
type WriterLease struct {
	// Writer is set on a process that writes or stands by to write (role
	// writer or all); Held while it holds the lease and may commit, Lapsed
	// while it holds it but has not renewed it in time (it commits
	// nothing). A writer that holds neither stands by.
	Writer, Held, Lapsed bool
	// Known is false until the lease was read (a reader's first look).
	Known bool
	// Holder names the process that holds (or last held) the lease, Epoch
	// its writer epoch, TTL its time to live.
	Holder string
	Epoch  int64
	TTL    time.Duration
	// RenewedAt is the holder's last renewal by the database's clock,
	// RenewalAge its age now, ExpiresIn how long the lease runs on
	// (negative: expired that long ago; nobody writes).
	RenewedAt  time.Time
	RenewalAge time.Duration
	ExpiresIn  time.Duration
	// SessionWatched is set while the holder names the database session
	// on which it holds the lease's session lock (a standby takes over the
	// moment that session ends); SessionEnded (a reader's read) once that
	// session has ended: the holder is gone, although the lease has not
	// expired.
	SessionWatched, SessionEnded bool
	// Since is when the lease came to stand as it does: a writer's taking
	// it (held) or beginning to wait (standing by); for a reader the
	// holder's taking it, or its expiry.
	Since time.Time
}

// Expired reports whether the lease has expired: no process writes.
func (l *WriterLease) Expired() bool { return l.Known && l.ExpiresIn <= 0 }

// NoWriter reports whether no process writes: the lease has expired, or
// its holder's session has ended.
func (l *WriterLease) NoWriter() bool { return l.Expired() || (l.Known && l.SessionEnded) }

// HandshakeFailure is a handshake the node refused or cut short.
type HandshakeFailure struct {
	Reason  string // network_magic, version, decode, refused, closed or timeout
	Message string
}

// NodeWait is the follower waiting for a node whose tip is behind its point.
type NodeWait struct {
	NodeTip chain.Tip
	Point   chain.BlockHeader
	Since   time.Time
}

// Blocks is how many blocks the node is behind the follower.
func (w *NodeWait) Blocks() uint64 {
	if w.NodeTip.BlockNo >= w.Point.BlockNo {
		return 0
	}
	return w.Point.BlockNo - w.NodeTip.BlockNo
}

// Divergence is why following stopped for the operator, and what to run.
type Divergence struct {
	Reason, Action string
	Since          time.Time
}
