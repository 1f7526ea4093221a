package streamingtest

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/streamstore"
)

// Server is a running streaming server for a test.
type Server struct {
	*streaming.Server
	URL      string
	Registry *prometheus.Registry
	stopped  bool
}

// ServerOptions tune StartServer.
type ServerOptions struct {
	// Config changes the test defaults.
	Config func(*streaming.Config)
	// Streams keeps durable streams (nil: none).
	Streams streamstore.Store
	// Addr to listen on (default 127.0.0.1:0).
	Addr string
	// Logger (default: none).
	Logger *zap.Logger
}

// TestConfig is the configuration tests start from: the defaults with
// short intervals, and limits on a client's pace (the pong's wait, a
// write's) long enough that a client the machine's load holds back is not
// cut off: they cut a client only in the tests of them, which set them
// short.
func TestConfig() streaming.Config {
	cfg := streaming.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.HeartbeatInterval = time.Second
	cfg.PingTimeout = time.Minute
	cfg.WriteTimeout = time.Minute
	cfg.RetryDelay = 100 * time.Millisecond
	return cfg
}

// StartServer starts a streaming server over h; it shuts down when the
// test ends (unless Stop was called).
func StartServer(t testing.TB, h *History, o ServerOptions) *Server {
	t.Helper()
	cfg := TestConfig()
	if o.Addr != "" {
		cfg.Addr = o.Addr
	}
	if o.Config != nil {
		o.Config(&cfg)
	}
	reg := prometheus.NewRegistry()
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
	}
	s, err := streaming.New(cfg, streaming.Deps{History: h.Handle, System: h.System, Streams: o.Streams, Logger: log, Registerer: reg,
		Tip: func() chain.Tip { return chain.Tip{BlockNo: 1} }})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := &Server{Server: s, Registry: reg, URL: "ws://" + s.Addr().String() + "/"}
	t.Cleanup(func() { srv.Stop(t) })
	return srv
}

// Stop shuts the server down (once).
func (s *Server) Stop(t testing.TB) {
	if s.stopped {
		return
	}
	s.stopped = true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("streaming server shutdown: %v", err)
	}
}

// Metric returns the value of a counter or gauge (summed over labels).
func (s *Server) Metric(t testing.TB, name string) float64 {
	t.Helper()
	mfs, err := s.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				v += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				v += m.GetGauge().GetValue()
			}
		}
	}
	return v
}
