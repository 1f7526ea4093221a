package service

import (
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
)

// TestStreamingConfigLeases: on PostgreSQL the streaming server gets a
// lease holder of its own and the configured lease timing; on the embedded
// store, where one process serves the streams, no lease at all.
func TestStreamingConfigLeases(t *testing.T) {
	cfg := &config.Config{}
	cfg.Streaming.Token, cfg.Streaming.QueueBudgetMB = "secret-0123456789", 64
	cfg.Streaming.LeaseTTL, cfg.Streaming.LeaseRetry = 3*time.Second, 250*time.Millisecond
	s := &Service{cfg: cfg, log: zap.NewNop()}
	if sc := s.streamingConfig(cfg); sc.LeaseHolder != "" || sc.LeaseTTL != 0 || sc.LeaseRetry != 0 {
		t.Fatalf("embedded store: holder %q, TTL %s, retry %s", sc.LeaseHolder, sc.LeaseTTL, sc.LeaseRetry)
	}
	cfg.Store.DatabaseURL = "postgres://127.0.0.1/x"
	sc := s.streamingConfig(cfg)
	if sc.LeaseHolder == "" || sc.LeaseTTL != 3*time.Second || sc.LeaseRetry != 250*time.Millisecond {
		t.Fatalf("PostgreSQL: holder %q, TTL %s, retry %s", sc.LeaseHolder, sc.LeaseTTL, sc.LeaseRetry)
	}
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
}
