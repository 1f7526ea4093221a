package service

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/actors/pipeline"
	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/metrics"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/network"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/status"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/stores"
	"github.com/marlowe-follower/follower/contracts"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/pgstore"
	"github.com/marlowe-follower/follower/history/storage"
)

// Reader serves the query API, the runtime view, SSE and the WebSocket API
// from the shared PostgreSQL database a writer fills (role reader, and a
// standby writer meanwhile): no node connection, no follower, processor,
// history writer or projection. Its history store is a history.Mirror that
// learns of the writer's commits by LISTEN/NOTIFY on store.databaseURL and
// reads the records from store.readDatabaseURL (a streaming replica) or,
// without one, from store.databaseURL; the contract projection is read as
// the writer stored it (contracts.View); whether anybody writes is read
// from the writer lease (storage.LeaseWatch).
type Reader struct {
	*node
	mirror  *history.Mirror
	view    *contracts.View
	replica *stores.Stores // the read database, when it is a replica
	watch   *storage.LeaseWatch
}

// standbyOf is what a standby writer's reader shows of the writer: its
// role and the writer lease it waits for.
type standbyOf struct {
	role  string
	lease *storage.Lease
}

// startReader starts a reader on st; standby, when set, is the writer that
// waits for the lease while the reader serves in its place (a hot
// standby): /status then shows the writer's role and its writerLease,
// /readyz is 503 writer_standby, and marlowe_role is the writer's.
func startReader(ctx context.Context, cfg *config.Config, log *zap.Logger, opts Options, st *stores.Stores, standby *standbyOf) (*Reader, error) {
	slots, err := network.NodeSlotConfig(&cfg.Node)
	if err != nil {
		return nil, err
	}
	source, ok := st.History.(*pgstore.Store)
	if pg := st.Postgres(); pg == nil || !ok {
		return nil, errors.New("role reader needs PostgreSQL (store.databaseURL)")
	}
	if err := st.CheckStreams(ctx, cfg.Node.NetworkMagic); err != nil {
		return nil, err
	}
	r := &Reader{node: newNode(cfg, log)}
	role, lease := config.RoleReader, metrics.Writer(nil)
	if standby != nil {
		role, lease = standby.role, standby.lease
	}
	r.metrics.RegisterRole(role, lease)
	read := st
	if cfg.Store.ReadDatabaseURL != "" {
		if r.replica, err = stores.OpenReplica(ctx, cfg.Store.ReadDatabaseURL); err != nil {
			return nil, err
		}
		read = r.replica
	}
	err = r.startPipeline(ctx, pipeline.Config{
		History: read.History, Slots: slots, Mirror: &pipeline.Mirror{Source: source},
		Streaming: r.streaming(st.Streams, r.writerTip), Middleware: opts.Middleware,
	})
	if err == nil {
		r.mirror = r.pipe.Mirror
		// The contracts as the writer's projection stored them, read where
		// the records are.
		r.view, err = contracts.NewView(ctx, read.Contracts, r.pipe.Handle, 0)
	}
	if err == nil {
		r.metrics.RegisterStore(r.pipe.Store.Stats())
		r.metrics.RegisterMirror(r.mirror)
		r.watch = storage.WatchLease(st.Postgres().Pool, log.Named("lease"))
		r.metrics.RegisterLeaseWatch(r.watch)
		rs := status.Reader{Version: opts.Version, Magic: cfg.Node.NetworkMagic, Mirror: r.mirror, Handle: r.pipe.Handle, View: r.view, Watch: r.watch}
		if standby != nil {
			rs.StandbyOf, rs.Standby = standby.role, standby.lease
		}
		err = r.serve(opts, queryParts{contracts: read.Contracts, projection: r.view, status: rs.Of})
	}
	if err != nil {
		_ = r.stop(config.DefaultShutdownGrace)
		return nil, err
	}
	log.Info("serving as a reader", zap.Bool("replica", r.mirror.Replica()), zap.Uint32("networkMagic", cfg.Node.NetworkMagic),
		zap.Int64("head", r.pipe.Handle.Head()))
	return r, nil
}

// writerTip is the node's tip as the writer stored it.
func (r *Reader) writerTip() chain.Tip {
	if r.mirror == nil {
		return chain.Tip{}
	}
	if p := r.mirror.Stats().Writer.Load(); p != nil {
		return p.Tip
	}
	return chain.Tip{}
}

// stop takes the pipeline down, then the reader's own connections (the
// view, the lease watch, the replica); the stores stay open.
func (r *Reader) stop(timeout time.Duration) error {
	err := r.stopPipeline(timeout)
	if r.view != nil {
		r.view.Close()
	}
	if r.watch != nil {
		r.watch.Close()
	}
	if r.replica != nil {
		err = errors.Join(err, r.replica.Close())
	}
	return err
}
