package streaming

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/streaming/wire"
)

// connDeps is what every connection actor of a server (WebSocket or
// event stream) shares: the configuration values it reads, the metrics it
// counts, the tip, the queue budget and the logger. The server fills it
// once; the connections only read it, and never reach back into the
// server.
type connDeps struct {
	cfg    connConfig
	m      *connMetrics
	tips   *wire.Tips
	budget *queueBudget // the frames queued on all WebSocket connections
	log    *zap.Logger
}

// connConfig is what a connection reads of the server's configuration
// (see Config).
type connConfig struct {
	maxSubscriptions int
	maxBatchSize     int
	maxBatchTimeout  time.Duration
	maxBadFrames     int
	sendQueueFrames  int
	sendQueueBytes   int64
	writeTimeout     time.Duration
	pingTimeout      time.Duration
	queueBudget      int64
}

// connMetrics are the connections' gauges and counters (registered by the
// server).
type connMetrics struct {
	connections prometheus.Gauge
	subscribers prometheus.Gauge
	sseClients  prometheus.Gauge
	staleAcks   prometheus.Counter
	badFrames   *prometheus.CounterVec // by error code
	disconnects *prometheus.CounterVec // by reason
	slowDropped prometheus.Counter
	budgetCuts  prometheus.Counter
}

// connDeps is what the server's connection actors share.
func (s *Server) connDeps() connDeps {
	m, cfg := s.m, &s.cfg
	return connDeps{
		cfg: connConfig{maxSubscriptions: cfg.MaxSubscriptions, maxBatchSize: cfg.MaxBatchSize, maxBatchTimeout: cfg.MaxBatchTimeout,
			maxBadFrames: cfg.MaxBadFrames, sendQueueFrames: cfg.SendQueueFrames, sendQueueBytes: cfg.SendQueueBytes,
			writeTimeout: cfg.WriteTimeout, pingTimeout: cfg.PingTimeout, queueBudget: cfg.QueueBudget},
		m: &connMetrics{connections: m.connections, subscribers: m.subscribers, sseClients: m.sseClients, staleAcks: m.staleAcks,
			badFrames: m.badFrames, disconnects: m.disconnects, slowDropped: m.slowDropped, budgetCuts: m.budgetCuts},
		tips: s.tips, budget: &s.budget, log: s.log,
	}
}
