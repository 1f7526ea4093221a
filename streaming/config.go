package streaming

import (
	"github.com/asynkron/protoactor-go/actor"

	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/query/origin"
	"github.com/marlowe-follower/follower/streaming/auth"
	"github.com/marlowe-follower/follower/streaming/stream"
	"github.com/marlowe-follower/follower/streaming/streamstore"
)

// Defaults of Config.
const (
	DefaultAddr                = ":3781"
	DefaultMaxFrameBytes       = 64 << 10
	DefaultMaxSubscriptions    = 64
	DefaultMaxConnections      = 10000
	DefaultSendQueueFrames     = 64
	DefaultSendQueueBytes      = 8 << 20
	DefaultWriteTimeout        = 10 * time.Second
	DefaultHeartbeatInterval   = 10 * time.Second
	DefaultPingTimeout         = 20 * time.Second
	DefaultMaxBadFrames        = 10
	DefaultBatchSize           = 200
	DefaultMaxBatchSize        = 5000
	DefaultBatchTimeout        = 0
	DefaultMaxBatchTimeout     = 10 * time.Second
	DefaultRetryDelay          = 2 * time.Second
	DefaultShutdownCloseWindow = 5 * time.Second
	// DefaultReadHeaderTimeout and DefaultMaxHeaderBytes are the query
	// port's (query.DefaultReadHeaderTimeout, query.DefaultMaxHeaderBytes):
	// both ports cut slow request headers at the same time and answer 431
	// to the same header size.
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	// DefaultQueueBudget bounds the frames queued for all connections
	// together: 2 GiB, sized for a 24 GiB machine (the rest for the Go
	// heap's headroom, history pages of subscribers catching up, the
	// databases and the page cache).
	DefaultQueueBudget = 2 << 30
)

// Config is the streaming server's configuration. DefaultConfig fills every
// field; zero values are refused by Validate except where noted.
type Config struct {
	// Addr is the address Start listens on, host:port
	// (MARLOWE_RT_STREAMING_HOST and MARLOWE_RT_STREAMING_PORT).
	Addr string
	// Token, when not empty, is a bearer token clients may present
	// (Authorization: Bearer TOKEN, or ?access_token=TOKEN for browsers)
	// on the WebSocket, the Server-Sent Events and the /streams endpoints
	// (MARLOWE_RT_STREAMING_TOKEN): the token named auth.LegacyName with
	// the default scopes, beside Tokens.
	Token string
	// Tokens are the named bearer tokens (MARLOWE_RT_STREAMING_TOKENS). A
	// durable stream belongs to the token that created it. With neither
	// Token nor Tokens the server is open: anyone may do anything.
	Tokens []auth.Token
	// Origins are the browser origins whose pages may open a WebSocket:
	// exact origins, scheme://host[:port] (https://dapp.example,
	// http://localhost:5173), or "*" for any (MARLOWE_RT_STREAMING_ORIGINS,
	// by default those of MARLOWE_RT_CORS_ORIGINS). Besides them, pages of
	// the address Start listens on are allowed: for a loopback or
	// unspecified host http://127.0.0.1:PORT, http://localhost:PORT and
	// http://[::1]:PORT. The request's Host header never counts: a
	// DNS-rebinding page sends Host and Origin both with the attacker's
	// name. Clients that send no Origin (programs, not browsers) are always
	// allowed. Others are refused with 403 before the upgrade.
	Origins []string
	// MaxFrameBytes is the largest frame a client may send; a larger one
	// closes the connection (status 1009).
	MaxFrameBytes int64
	// MaxSubscriptions is the number of streams one connection may have.
	MaxSubscriptions int
	// MaxConnections caps WebSocket connections and event-stream clients
	// together; more are refused with 503.
	MaxConnections int
	// SendQueueFrames and SendQueueBytes bound each connection's queue of
	// frames not yet written to its socket.
	SendQueueFrames int
	SendQueueBytes  int64
	// WriteTimeout is how long a frame may wait for room in the send queue,
	// and how long writing it to the socket may take. A client that does
	// not read for that long is disconnected ("slow consumer").
	WriteTimeout time.Duration
	// HeartbeatInterval is how often a connection with subscriptions gets a
	// heartbeat frame with the tip, and is pinged.
	HeartbeatInterval time.Duration
	// PingTimeout is how long a ping may wait for its pong before the
	// connection is closed ("ping timeout").
	PingTimeout time.Duration
	// MaxBadFrames is how many bad frames (malformed JSON, unknown
	// commands, invalid fields) a connection may send before it is closed
	// ("too many bad frames", status 1008).
	MaxBadFrames int
	// DefaultBatchSize is the batch size of subscriptions that give none;
	// MaxBatchSize the largest a subscription may ask for.
	DefaultBatchSize int
	MaxBatchSize     int
	// DefaultBatchTimeout is how long a batch waits to fill up when a
	// subscription gives no batchTimeout (0: a batch goes out as soon as
	// records are there); MaxBatchTimeout the longest one may ask for.
	DefaultBatchTimeout time.Duration
	MaxBatchTimeout     time.Duration
	// AckTimeout, when not zero, ends a round trip whose batch is not
	// acknowledged in time: the records go out again, to the next
	// connection in turn. 0 waits as long as the connection lives.
	AckTimeout time.Duration
	// RetryDelay is the wait after a failed read of the history before a
	// stream reads again.
	RetryDelay time.Duration
	// ReadHeaderTimeout is how long a client may take to send the
	// handshake's request headers before its connection is closed, and
	// MaxHeaderBytes their largest size (a larger request gets 431): the
	// query port's limits.
	ReadHeaderTimeout time.Duration
	MaxHeaderBytes    int
	// QueueBudget bounds the bytes of frames queued for sending, over all
	// connections together (each connection's own bound is
	// SendQueueBytes): a frame that would take the total above it cuts
	// off the connections with the most queued, largest first, until it
	// fits ("memory budget", status 1008). A frame counts until it is
	// written to its socket (MARLOWE_RT_STREAMING_QUEUE_BUDGET_MB).
	QueueBudget int64
	// CatchUpCacheBytes bounds the shared catch-up cache (streaming/catchup:
	// pages of the log read once for every stream catching up through
	// them), and CatchUpReads the catch-up reads of the database running at
	// once; 0 takes catchup.DefaultMaxBytes and catchup.DefaultMaxReads,
	// negative shares no page (every stream reads its own, to compare
	// with) and bounds no read.
	CatchUpCacheBytes int64
	CatchUpReads      int
	// LeaseHolder, when not empty, names this process among several that
	// serve the durable streams of one database (writers and readers on
	// PostgreSQL; streamstore.NewHolder): a durable stream in ack mode then
	// sends a batch only under its round-trip lease (streamstore's
	// StreamLease), so that at most one process at a time has a batch of
	// the stream in flight, the processes take turns, and an
	// acknowledgement moves the stored cursor only under the lease it was
	// made under. Empty: this process is the streams' only server (the
	// embedded SQLite store).
	LeaseHolder string
	// LeaseTTL is a lease's life without renewal (streamstore.DefaultLeaseTTL
	// when 0): how long a durable stream stays with a process that died
	// with a batch in flight. LeaseRetry is how long a stream whose lease
	// another process holds waits before it asks again
	// (DefaultLeaseRetry when 0).
	LeaseTTL, LeaseRetry time.Duration
}

// DefaultLeaseRetry is Config.LeaseRetry's default.
const DefaultLeaseRetry = stream.DefaultLeaseRetry

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Addr: DefaultAddr, MaxFrameBytes: DefaultMaxFrameBytes, MaxSubscriptions: DefaultMaxSubscriptions,
		MaxConnections: DefaultMaxConnections, SendQueueFrames: DefaultSendQueueFrames, SendQueueBytes: DefaultSendQueueBytes,
		WriteTimeout: DefaultWriteTimeout, HeartbeatInterval: DefaultHeartbeatInterval, PingTimeout: DefaultPingTimeout,
		MaxBadFrames: DefaultMaxBadFrames, DefaultBatchSize: DefaultBatchSize, MaxBatchSize: DefaultMaxBatchSize,
		DefaultBatchTimeout: DefaultBatchTimeout, MaxBatchTimeout: DefaultMaxBatchTimeout, RetryDelay: DefaultRetryDelay,
		ReadHeaderTimeout: DefaultReadHeaderTimeout, MaxHeaderBytes: DefaultMaxHeaderBytes, QueueBudget: DefaultQueueBudget,
	}
}

// Validate checks the configuration and names the field that is wrong.
func (c *Config) Validate() error {
	var errs []error
	positive := func(name string, ok bool) {
		if !ok {
			errs = append(errs, fmt.Errorf("streaming config: %s must be positive", name))
		}
	}
	positive("MaxFrameBytes", c.MaxFrameBytes > 0)
	positive("MaxSubscriptions", c.MaxSubscriptions > 0)
	positive("MaxConnections", c.MaxConnections > 0)
	positive("SendQueueFrames", c.SendQueueFrames > 0)
	positive("SendQueueBytes", c.SendQueueBytes > 0)
	positive("WriteTimeout", c.WriteTimeout > 0)
	positive("HeartbeatInterval", c.HeartbeatInterval > 0)
	positive("PingTimeout", c.PingTimeout > 0)
	positive("MaxBadFrames", c.MaxBadFrames > 0)
	positive("DefaultBatchSize", c.DefaultBatchSize > 0)
	positive("RetryDelay", c.RetryDelay > 0)
	positive("ReadHeaderTimeout", c.ReadHeaderTimeout > 0)
	positive("MaxHeaderBytes", c.MaxHeaderBytes > 0)
	positive("QueueBudget", c.QueueBudget > 0)
	if c.MaxBatchSize < c.DefaultBatchSize {
		errs = append(errs, fmt.Errorf("streaming config: MaxBatchSize %d is below DefaultBatchSize %d", c.MaxBatchSize, c.DefaultBatchSize))
	}
	if c.DefaultBatchTimeout < 0 || c.MaxBatchTimeout < c.DefaultBatchTimeout {
		errs = append(errs, fmt.Errorf("streaming config: want 0 <= DefaultBatchTimeout (%s) <= MaxBatchTimeout (%s)",
			c.DefaultBatchTimeout, c.MaxBatchTimeout))
	}
	if c.AckTimeout < 0 {
		errs = append(errs, errors.New("streaming config: AckTimeout must not be negative"))
	}
	if c.LeaseTTL < 0 || c.LeaseRetry < 0 {
		errs = append(errs, errors.New("streaming config: LeaseTTL and LeaseRetry must not be negative"))
	}
	if _, err := origin.Parse(c.Origins); err != nil {
		errs = append(errs, fmt.Errorf("streaming config: Origins: %w", err))
	}
	if _, err := auth.New(c.AllTokens()); err != nil {
		errs = append(errs, fmt.Errorf("streaming config: Tokens: %w", err))
	}
	return errors.Join(errs...)
}

// AllTokens returns Tokens with Token (when set) as the token named
// auth.LegacyName.
func (c *Config) AllTokens() []auth.Token {
	out := slices.Clone(c.Tokens)
	if c.Token != "" {
		out = append(out, auth.Token{Name: auth.LegacyName, Secret: c.Token})
	}
	return out
}

// Deps are what the server works with.
type Deps struct {
	// History is the history store's read side (required).
	History *history.Handle
	// Streams keeps durable streams; nil refuses durable subscriptions.
	// Open it with sqlstreams (New on the process's database, or OpenSQLite, OpenPostgres).
	Streams streamstore.Store
	// Tip returns the node's chain tip for frames (nil: a zero tip).
	Tip func() chain.Tip
	// Logger (nil: no logs).
	Logger *zap.Logger
	// Registerer receives the server's metrics (nil: not registered).
	Registerer prometheus.Registerer
	// System is the actor system Start spawns the server actor in: the
	// history store's (its Feeds deliver to the stream actors). A parent
	// that spawns Props itself needs none.
	System *actor.ActorSystem
	// Middleware wraps the Receive of every connection and stream actor
	// the server actor spawns (the pipeline passes its own: tests inject
	// faults with it).
	Middleware []actor.ReceiverMiddleware
}
