// Package conn is the streaming server's connection actors: one per
// WebSocket (Actor) and one per Server-Sent Events stream (Events), each a
// child of the server actor, with its bounded send queue (SendQueue) in
// the account of the queue budget all connections share (Budget). A
// connection talks to the server and stream actors only through
// streaming/wire messages and PIDs, and is built from a Deps the server
// fills once: it never reaches back into the server.
package conn

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/streaming/wire"
)

// Deps is what every connection actor of a server (WebSocket or event
// stream) shares: the configuration values it reads, the metrics it
// counts, the tip, the queue budget and the logger. The server fills it
// once; the connections only read it.
type Deps struct {
	Config  Config
	Metrics *Metrics
	Tips    *wire.Tips
	// Budget accounts the frames queued on all WebSocket connections.
	Budget *Budget
	Log    *zap.Logger
}

// Config is what a connection reads of the server's configuration (see
// streaming.Config).
type Config struct {
	// MaxSubscriptions, MaxBatchSize and MaxBatchTimeout bound a
	// connection's subscribe commands.
	MaxSubscriptions int
	MaxBatchSize     int
	MaxBatchTimeout  time.Duration
	// MaxBadFrames is how many bad frames a client may send before its
	// connection is closed.
	MaxBadFrames int
	// SendQueueFrames and SendQueueBytes bound a connection's send queue.
	SendQueueFrames int
	SendQueueBytes  int64
	// WriteTimeout bounds a frame's wait for room and a write to the
	// socket; PingTimeout a ping's wait for its pong.
	WriteTimeout time.Duration
	PingTimeout  time.Duration
	// QueueBudget is the budget's limit, as the log tells it.
	QueueBudget int64
}

// Metrics are the connections' gauges and counters (registered by the
// server).
type Metrics struct {
	Connections prometheus.Gauge
	Subscribers prometheus.Gauge
	SSEClients  prometheus.Gauge
	StaleAcks   prometheus.Counter
	BadFrames   *prometheus.CounterVec // by error code
	Disconnects *prometheus.CounterVec // by reason
	SlowDropped prometheus.Counter
	BudgetCuts  prometheus.Counter
}
