package service

import (
	"net"
	"strconv"

	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/streamstore"
)

// streamingConfig is the streaming server's configuration from the
// service's, for every role. On PostgreSQL several processes (a writer, its
// standby, readers) may serve the durable streams of one database, so each
// process leases a durable stream's round trips under a holder name of its
// own (streaming.Config.LeaseHolder); the embedded SQLite store has one
// process and needs no lease.
func (s *Service) streamingConfig(cfg *config.Config) streaming.Config {
	scfg := streaming.DefaultConfig()
	scfg.Addr = ""
	if cfg.Streaming.Port != 0 {
		scfg.Addr = net.JoinHostPort(cfg.ListenHost(cfg.Streaming.Host), strconv.Itoa(cfg.Streaming.Port))
	}
	scfg.Tokens = cfg.StreamingTokens()
	s.warnIfOpen()
	scfg.Origins = cfg.StreamingOrigins()
	scfg.QueueBudget = int64(cfg.Streaming.QueueBudgetMB) << 20
	if cfg.Store.DatabaseURL != "" {
		scfg.LeaseHolder = streamstore.NewHolder()
		scfg.LeaseTTL, scfg.LeaseRetry = cfg.Streaming.LeaseTTL, cfg.Streaming.LeaseRetry
	}
	return scfg
}
