package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/actors/pipeline"
	"github.com/marlowe-follower/follower/chainsync"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/metrics"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/network"
	"github.com/marlowe-follower/follower/query"
	"github.com/marlowe-follower/follower/query/explorer"
	"github.com/marlowe-follower/follower/streaming"
	"github.com/marlowe-follower/follower/streaming/streamstore"
)

// node is what either role runs over the stores: the actor pipeline, the
// query API beside it, and the error that stops them.
type node struct {
	cfg      *config.Config
	log      *zap.Logger
	metrics  *metrics.Metrics
	progress *chainsync.Progress
	pipe     *pipeline.Pipeline
	query    *query.Server
	fatal    chan error
}

func newNode(cfg *config.Config, log *zap.Logger) *node {
	return &node{cfg: cfg, log: log, metrics: metrics.New(), progress: &chainsync.Progress{}, fatal: make(chan error, 1)}
}

func (n *node) parts() *node { return n }

// startPipeline starts the pipeline, with the query API among the servers
// it stops, and reports on fatal its stopping on its own.
func (n *node) startPipeline(ctx context.Context, pc pipeline.Config) error {
	pc.Logger, pc.Progress, pc.Servers = n.log, n.progress, []pipeline.Server{queryShutdown{n}}
	p, err := pipeline.Start(ctx, pc)
	if err != nil {
		if le := (*pipeline.ListenError)(nil); errors.As(err, &le) {
			err = fmt.Errorf("streaming.port %d: %w", n.cfg.Streaming.Port, le.Err)
		}
		return err
	}
	n.pipe = p
	go func() {
		<-p.Done()
		if err := p.Err(); err != nil {
			select {
			case n.fatal <- err:
			default: // the writer lease was lost first
			}
		}
	}()
	return nil
}

// stopPipeline stops the pipeline (and with it the query API), if it runs.
func (n *node) stopPipeline(timeout time.Duration) error {
	if n.pipe == nil {
		return nil
	}
	return n.pipe.Stop(timeout)
}

// streaming is the streaming server's part of the pipeline, on the durable
// streams' store st, telling clients the node's tip.
func (n *node) streaming(st streamstore.Store, tip func() chain.Tip) *pipeline.Streaming {
	n.cfg.LogIfOpen(n.log)
	return &pipeline.Streaming{Config: n.cfg.StreamingServer(), Deps: streaming.Deps{
		Streams: st, Logger: n.log, Registerer: n.metrics.Registry, Tip: tip,
	}}
}

// queryParts are what the query API reads: the contracts, the
// projection's position, the role's state, and a contract cache (nil for
// none).
type queryParts struct {
	contracts  query.ContractReader
	projection query.Projection
	cache      *query.ContractCache
	status     func() query.Status
}

// serve starts the query API, unless its port is 0, with the pipeline's
// server-sent events and stream routes, the explorer (query.ui) and
// opts.Handlers beside it.
func (n *node) serve(opts Options, parts queryParts) error {
	if n.cfg.Query.Port == 0 {
		return nil
	}
	slots, err := network.NodeSlotConfig(&n.cfg.Node)
	if err != nil {
		return err
	}
	handlers := maps.Clone(opts.Handlers)
	if handlers == nil {
		handlers = map[string]http.Handler{}
	}
	streams := n.pipe.StreamsHandler()
	handlers["GET /events"] = n.pipe.EventsHandler()
	for _, route := range []string{"GET /streams", "GET /streams/{name}", "DELETE /streams/{name}"} {
		handlers[route] = streams
	}
	if n.cfg.Query.UI { // the contract explorer at / and /ui/ (query.ui, --no-ui)
		ui, err := explorer.New(explorer.Options{Network: network.Name(n.cfg.Node.NetworkMagic), Links: n.cfg.Query.UILinks,
			APIDocs: append(slices.Clone(explorer.DefaultAPIDocs), explorer.APIDoc{Path: "runtime/openapi.json", Title: "Marlowe Runtime view"})})
		if err != nil {
			return err // (it names query.uiLinks)
		}
		maps.Copy(handlers, ui.Routes())
	}
	srv, err := query.New(query.Config{
		Addr:      net.JoinHostPort(n.cfg.ListenHost(n.cfg.Query.Host), strconv.Itoa(n.cfg.Query.Port)),
		Contracts: parts.contracts, History: n.pipe.Handle, Projection: parts.projection, Cache: parts.cache, Slots: &slots,
		Status: parts.status, Metrics: n.metrics.Handler(), Registerer: n.metrics.Registry,
		ReadyMaxBehind: n.cfg.Query.ReadyDistance, ReadyMaxSeqLag: int64(min(n.cfg.Query.ReadyProjectionLag, math.MaxInt64)),
		Handlers: handlers, Logger: n.log, CORS: query.CORS{Origins: n.cfg.CORS.Origins},
	})
	if err != nil {
		return fmt.Errorf("query.port: %w", err)
	}
	if err := srv.Start(); err != nil {
		return fmt.Errorf("query.port %d: %w", n.cfg.Query.Port, err)
	}
	n.query = srv
	return nil
}

// queryShutdown stops the query API when the pipeline stops its servers:
// after the streaming server (which ends the event streams the query
// port serves) and before the projection.
type queryShutdown struct{ n *node }

func (q queryShutdown) Shutdown(ctx context.Context) error {
	if q.n.query == nil {
		return nil
	}
	return q.n.query.Shutdown(ctx)
}

func (n *node) queryAddr() string {
	if n.query == nil {
		return ""
	}
	return n.query.Addr()
}

func (n *node) streamingAddr() string {
	if n.cfg.Streaming.Port == 0 {
		return ""
	}
	return n.pipe.StreamingAddr()
}
