package config

import (
	"testing"
	"time"
)

// TestStreamingConfigLeases: on PostgreSQL the streaming server gets a
// lease holder of its own and the configured lease timing; on the embedded
// store, where one process serves the streams, no lease at all.
func TestStreamingConfigLeases(t *testing.T) {
	cfg := &Config{}
	cfg.Streaming.Token, cfg.Streaming.QueueBudgetMB = "secret-0123456789", 64
	cfg.Streaming.LeaseTTL, cfg.Streaming.LeaseRetry = 3*time.Second, 250*time.Millisecond
	if sc := cfg.StreamingServer(); sc.LeaseHolder != "" || sc.LeaseTTL != 0 || sc.LeaseRetry != 0 {
		t.Fatalf("embedded store: holder %q, TTL %s, retry %s", sc.LeaseHolder, sc.LeaseTTL, sc.LeaseRetry)
	}
	cfg.Store.DatabaseURL = "postgres://127.0.0.1/x"
	sc := cfg.StreamingServer()
	if sc.LeaseHolder == "" || sc.LeaseTTL != 3*time.Second || sc.LeaseRetry != 250*time.Millisecond {
		t.Fatalf("PostgreSQL: holder %q, TTL %s, retry %s", sc.LeaseHolder, sc.LeaseTTL, sc.LeaseRetry)
	}
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
}
