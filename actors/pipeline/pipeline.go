// Package pipeline is the one place that starts the service's actors: a
// root actor whose children are the chain-sync follower, the history
// processor, the history store, the contract projection and the streaming
// server, with one supervision rule (see Start).
//
//	follower ──ChainEvent──▶ processor ──Step──▶ history store ──Delivery──▶ projection
//	    ▲                                            │  ▲
//	    └────────────── CreditsReturned ─────────────┘  └── subscriptions ── streaming server
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/chainsync/handoff"
	"github.com/marlowe-follower/follower/contracts"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/processor"
	"github.com/marlowe-follower/follower/streaming"
)

// Defaults of the supervision rule.
const (
	DefaultMaxRestarts   = 5
	DefaultRestartWindow = time.Minute
)

// Config is what a pipeline runs.
type Config struct {
	Logger *zap.Logger
	// History is the log's backend, initialised; the pipeline does not
	// close it. Without it the follower's events go to Sink.
	History history.Backend
	// Store tunes the history store (zero: history.DefaultStoreConfig).
	Store history.StoreConfig
	// Mirror, when set, makes the pipeline a reader's: its history store
	// is a history.Mirror of the writer's database that reads records from
	// History (the same database, or a replica of it); no follower or
	// processor runs (Follower must be nil).
	Mirror *Mirror
	// Slots is the network's slot configuration, for the processor.
	Slots chain.SlotConfig
	// Follower, when set, follows a node (InFlight defaults to the
	// store's Store.InFlight()).
	Follower *chainsync.Config
	// Classifier are the follower's classifier options.
	Classifier classify.Options
	// Progress is the follower's progress board (nil: a new one).
	Progress *chainsync.Progress
	// PageSize is how many records a catch-up read of the history asks
	// for (0: the Handle's default).
	PageSize int
	// Sink receives the follower's events when there is no History (the
	// follow command, benchmarks): a child actor calls it for each event.
	Sink chainsync.Sink
	// Contracts, when set, runs the contract projection (its History is
	// the pipeline's).
	Contracts *contracts.Config
	// Streaming, when set, runs the streaming server (its Deps.History is
	// the pipeline's).
	Streaming *Streaming
	// Servers are stopped, in order, right after the streaming server and
	// before the projection and the ingest chain (the query API).
	Servers []Server
	// MaxRestarts and RestartWindow are the supervision rule's limit: a
	// child that fails more than MaxRestarts times within RestartWindow
	// stops the pipeline (defaults DefaultMaxRestarts, DefaultRestartWindow).
	MaxRestarts   int
	RestartWindow time.Duration
	// Middleware wraps every child's Receive (tests inject faults with it).
	Middleware []actor.ReceiverMiddleware
}

// Mirror is a reader's history store: where the writer's commits are
// learned (the writer's database) and the mirror's settings.
type Mirror struct {
	Source history.CommitSource
	Config history.MirrorConfig
}

// Streaming is the streaming server's configuration and dependencies.
type Streaming struct {
	Config streaming.Config
	Deps   streaming.Deps
}

// Server is a server the pipeline stops with it.
type Server interface {
	Shutdown(ctx context.Context) error
}

// Role names a child of the pipeline.
type Role string

// The children.
const (
	Follower   Role = "follower"
	Processor  Role = "processor"
	Store      Role = "history store"
	Sink       Role = "sink"
	Projection Role = "projection"
	Streamer   Role = "streaming server"
)

// Pipeline is a running pipeline.
type Pipeline struct {
	cfg    Config
	log    *zap.Logger
	System *actor.ActorSystem
	// The parts that outlive their actors' incarnations (nil when not
	// configured).
	Store      *history.Store
	Handle     *history.Handle
	Mirror     *history.Mirror // a reader's (Config.Mirror), else nil
	Processor  *processor.Processor
	Follower   *chainsync.Follower
	Projection *contracts.Store
	Progress   *chainsync.Progress

	streaming  atomic.Pointer[streaming.Server] // the running incarnation's
	firstSrv   *streaming.Server                // started by Start, for the first incarnation
	streamAddr string                           // where the first one listens: the ones after it too

	root     *actor.PID
	done     chan struct{}
	err      error // why it stopped on its own; set before done closes
	stopOnce sync.Once

	mu       sync.Mutex
	children map[Role]*actor.PID
	restarts map[Role]int
}

// Start starts a pipeline. It returns once every child is spawned (and the
// streaming server listens); stop it with Stop.
//
// The supervision rule: a child that fails (its Receive panics) is stopped
// and started again as a fresh actor that resumes from what is committed,
// never from the state the failed one held: the history store from its
// checkpoint, the follower from the store's checkpoint, the projection
// from its stored cursor, the streaming server from the durable streams'
// stored cursors. The follower, the processor and the history store are
// one chain: when any of them fails, the others are stopped in order (what
// the store received is committed, unless the store is the one that
// failed) and the three start again together, so that nothing in flight
// between them is lost or doubled. A child that fails more than
// MaxRestarts times within RestartWindow, or fails with an error no
// restart can mend (permanent: another writer holds the store), stops the
// pipeline, and Err says why.
func Start(ctx context.Context, cfg Config) (*Pipeline, error) {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.History == nil && cfg.Sink == nil {
		return nil, errors.New("pipeline: a history backend or a sink is required")
	}
	if cfg.History == nil && (cfg.Contracts != nil || cfg.Streaming != nil) {
		return nil, errors.New("pipeline: the projection and the streaming server need a history backend")
	}
	if cfg.Store.BatchBlocks == 0 {
		observe := cfg.Store.ObserveCommit
		cfg.Store = history.DefaultStoreConfig()
		cfg.Store.ObserveCommit = observe
	}
	if cfg.MaxRestarts <= 0 {
		cfg.MaxRestarts = DefaultMaxRestarts
	}
	if cfg.RestartWindow <= 0 {
		cfg.RestartWindow = DefaultRestartWindow
	}
	p := &Pipeline{cfg: cfg, log: cfg.Logger.Named("pipeline"), Progress: cfg.Progress, done: make(chan struct{}),
		children: map[Role]*actor.PID{}, restarts: map[Role]int{}}
	if p.Progress == nil {
		p.Progress = &chainsync.Progress{}
	}
	p.System = NewSystem(cfg.Logger)
	if err := p.build(ctx); err != nil {
		p.System.Shutdown()
		return nil, err
	}
	started := make(chan struct{})
	p.root = p.System.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &root{p: p, started: started, alive: map[string]Role{}, failures: map[Role][]time.Time{}}
	}))
	<-started
	return p, nil
}

// build makes the parts that outlive their actors' incarnations: the
// history store (a writer's, or a reader's mirror) and its processor, the
// follower, the projection, and the first streaming server, listening.
func (p *Pipeline) build(ctx context.Context) error {
	cfg := p.cfg
	if cfg.Mirror != nil && (cfg.History == nil || cfg.Follower != nil) {
		return errors.New("pipeline: a mirror reads a history backend and runs no follower")
	}
	if err := p.buildHistory(ctx); err != nil {
		return err
	}
	if cfg.Follower != nil {
		fc := *cfg.Follower
		if fc.InFlight == 0 && cfg.History != nil {
			fc.InFlight = cfg.Store.InFlight()
		}
		var cp handoff.Checkpoints
		if p.Store != nil {
			cp = p.Store
		}
		f, err := chainsync.NewFollower(fc, cfg.Logger, cp, classify.New(cfg.Classifier), nil, p.Progress)
		if err != nil {
			return err
		}
		p.Follower = f
	}
	if cfg.Contracts != nil {
		cc := *cfg.Contracts
		cc.History = p.Handle
		if cc.Logger == nil {
			cc.Logger = cfg.Logger
		}
		proj, err := contracts.NewStore(ctx, cc)
		if err != nil {
			return err
		}
		p.Projection = proj
	}
	if cfg.Streaming != nil {
		srv, err := p.newStreamingServer(cfg.Streaming.Config.Addr)
		if err != nil {
			return err
		}
		if err := srv.Listen(); err != nil {
			_ = srv.Shutdown(ctx) // never started: releases its metrics
			return &ListenError{Err: err}
		}
		p.firstSrv = srv
		if a := srv.Addr(); a != nil {
			p.streamAddr = a.String()
		}
	}
	return nil
}

// buildHistory makes the history store, its handle and the processor: a
// reader's mirror (Config.Mirror), else the writer's store.
func (p *Pipeline) buildHistory(ctx context.Context) error {
	cfg := p.cfg
	switch {
	case cfg.Mirror != nil:
		m, err := history.NewMirror(ctx, cfg.History, cfg.Mirror.Source, cfg.Mirror.Config, cfg.Logger)
		if err != nil {
			return err
		}
		p.Mirror, p.Store = m, m.Store()
	case cfg.History != nil:
		st, err := history.NewStore(ctx, cfg.History, cfg.Store, cfg.Logger)
		if err != nil {
			return err
		}
		p.Store = st
		p.Processor = processor.New(cfg.Slots, cfg.Logger, nil)
	default:
		return nil
	}
	p.Handle = history.NewHandle(p.Store, p.System, nil)
	if cfg.PageSize > 0 {
		p.Handle.PageSize = cfg.PageSize
	}
	return nil
}

// newStreamingServer makes a streaming server for addr; its actor is
// the pipeline's streaming child.
func (p *Pipeline) newStreamingServer(addr string) (*streaming.Server, error) {
	sc := p.cfg.Streaming.Config
	sc.Addr = addr
	deps := p.cfg.Streaming.Deps
	deps.History = p.Handle
	deps.System = p.System
	deps.Middleware = append(deps.Middleware, p.cfg.Middleware...)
	srv, err := streaming.New(sc, deps)
	if err != nil {
		return nil, fmt.Errorf("streaming: %w", err)
	}
	return srv, nil
}

// streamingProps returns the props of a fresh streaming server's actor.
// The first incarnation's server was made and bound by Start, which
// reports a taken address; a later one listens where the first did, from
// its actor's start, which fails for the supervisor when it cannot.
func (p *Pipeline) streamingProps() *actor.Props {
	srv := p.firstSrv
	p.firstSrv = nil
	if srv == nil {
		var err error
		if srv, err = p.newStreamingServer(p.streamAddr); err != nil {
			// New checked this configuration once already: only a
			// metrics registration can fail, and the actor says so.
			return actor.PropsFromFunc(func(actor.Context) { panic(fmt.Errorf("restarting the streaming server: %w", err)) })
		}
	}
	p.streaming.Store(srv)
	return srv.Props()
}

// ListenError is Start's error when the streaming server cannot start
// (its address is taken).
type ListenError struct{ Err error }

func (e *ListenError) Error() string { return e.Err.Error() }

func (e *ListenError) Unwrap() error { return e.Err }

// Streaming returns the running streaming server (nil when there is none,
// or between two of its incarnations).
func (p *Pipeline) Streaming() *streaming.Server { return p.streaming.Load() }

// StreamingAddr returns where the streaming server listens ("" when it
// does not).
func (p *Pipeline) StreamingAddr() string { return p.streamAddr }

// EventsHandler serves the streaming server's server-sent events, whichever
// incarnation runs.
func (p *Pipeline) EventsHandler() http.Handler {
	return p.current(func(s *streaming.Server) http.Handler { return s.EventsHandler() })
}

// StreamsHandler serves the durable streams' HTTP API, whichever
// incarnation runs.
func (p *Pipeline) StreamsHandler() http.Handler {
	return p.current(func(s *streaming.Server) http.Handler { return s.StreamsHandler() })
}

func (p *Pipeline) current(h func(*streaming.Server) http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := p.streaming.Load()
		if s == nil {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"unavailable","message":"the streaming server is restarting"}` + "\n"))
			return
		}
		h(s).ServeHTTP(w, r)
	})
}

// Child returns the running child of a role (nil when none runs).
func (p *Pipeline) Child(r Role) *actor.PID {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.children[r]
}

// Restarts returns how many times the children of a role were restarted.
func (p *Pipeline) Restarts(r Role) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts[r]
}

// StopChild stops the projection or the streaming server (it finishes
// what it holds first) until StartChild; the rest of the pipeline runs on.
func (p *Pipeline) StopChild(r Role) error { return p.childRequest(r, false) }

// StartChild starts a fresh projection or streaming server stopped with
// StopChild; it resumes from what is committed.
func (p *Pipeline) StartChild(r Role) error { return p.childRequest(r, true) }

func (p *Pipeline) childRequest(r Role, start bool) error {
	done := make(chan error, 1)
	p.System.Root.Send(p.root, &childRequest{role: r, start: start, done: done})
	select {
	case err := <-done:
		return err
	case <-p.done:
		return errors.New("pipeline: stopped")
	}
}

// Done is closed once the pipeline has stopped: after Stop, or on its own
// (Err says why).
func (p *Pipeline) Done() <-chan struct{} { return p.done }

// Err returns why the pipeline stopped on its own (nil while it runs and
// after Stop).
func (p *Pipeline) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Stop stops the pipeline in order, committing what was received: the
// streaming server and Config.Servers, the projection (its last commit
// completes), then the follower, the processor and the history store,
// which commits its last batch. It waits at most timeout.
func (p *Pipeline) Stop(timeout time.Duration) error {
	p.stopOnce.Do(func() { p.System.Root.Send(p.root, &stopRequest{}) })
	var err error
	select {
	case <-p.done:
	case <-time.After(timeout):
		err = errors.New("shutdown took too long; stopping anyway")
	}
	p.System.Shutdown()
	return err
}

// errSinkRefused is the sink actor's failure: Config.Sink refused an event.
var errSinkRefused = errors.New("the sink refused an event")

// sinkActor hands the follower's events to Config.Sink and returns their
// credits.
type sinkActor struct{ sink chainsync.Sink }

func (s *sinkActor) Receive(c actor.Context) {
	if ev, ok := c.Message().(*handoff.ChainEvent); ok {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := s.sink.Deliver(ctx, ev.Event)
		cancel()
		if err != nil {
			// Restarting would deliver the same events again: stop.
			panic(fmt.Errorf("%w: %w", errSinkRefused, err))
		}
		handoff.Return(c.ActorSystem(), ev.Credit, 1)
	}
}
