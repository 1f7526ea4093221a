package config

import (
	"net"
	"strconv"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/streamstore"
)

// StreamingServer is the streaming server's configuration from the
// settings, for every role. On PostgreSQL several processes (a writer, its
// standby, readers) may serve the durable streams of one database, so each
// process leases a durable stream's round trips under a holder name of its
// own (streaming.Config.LeaseHolder); the embedded SQLite store has one
// process and needs no lease.
func (c *Config) StreamingServer() streaming.Config {
	scfg := streaming.DefaultConfig()
	scfg.Addr = ""
	if c.Streaming.Port != 0 {
		scfg.Addr = net.JoinHostPort(c.ListenHost(c.Streaming.Host), strconv.Itoa(c.Streaming.Port))
	}
	scfg.Tokens = c.StreamingTokens()
	scfg.Origins = c.StreamingOrigins()
	scfg.QueueBudget = int64(c.Streaming.QueueBudgetMB) << 20
	scfg.CatchUpCacheBytes, scfg.CatchUpReads = int64(c.Streaming.CatchUpCacheMB)<<20, c.Streaming.CatchUpReads
	if c.Store.DatabaseURL != "" {
		scfg.LeaseHolder = streamstore.NewHolder()
		scfg.LeaseTTL, scfg.LeaseRetry = c.Streaming.LeaseTTL, c.Streaming.LeaseRetry
	}
	return scfg
}

// LogIfOpen says, when no streaming token is set, that anyone who reaches
// the ports may consume, acknowledge and delete every durable stream: a
// warning when a port listens beyond loopback, a notice (INFO) when both
// listen on loopback only, as they do by default then (run --devnet).
func (c *Config) LogIfOpen(log *zap.Logger) {
	if !c.Open() {
		return
	}
	q, st := c.ListenHost(c.Query.Host), c.ListenHost(c.Streaming.Host)
	fields := []zap.Field{zap.String("queryHost", q), zap.String("streamingHost", st)}
	const set = "set streaming.tokens (MARLOWE_RT_STREAMING_TOKENS)"
	if isLoopback(q) && isLoopback(st) {
		log.Info("the service is open to this machine: no streaming token is set, so any local process may consume, "+
			"acknowledge and delete every durable stream; "+set, fields...)
		return
	}
	log.Warn("the service is open: no streaming token is set, so anyone who reaches the query or streaming port "+
		"may consume, acknowledge and delete every durable stream; "+set, fields...)
}

// isLoopback reports whether a listening host is a loopback address.
func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}
