// Package service runs marlowe-follower in its role on its stores
// (stores.Open: one database, migrated once): a Writer (roles all and
// writer: it follows the node and writes; on PostgreSQL one process at a
// time, the holder of the writer lease, the others standing by) or a
// Reader (role reader: it serves the database a writer fills). Each runs
// the actor pipeline (pipeline.Start) and the query API, and takes them
// down in order.
package service

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/storelock"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/stores"
	"github.com/marlowe-follower/follower/contracts"
	"github.com/marlowe-follower/follower/history"
)

// Options tune a service beyond its configuration.
type Options struct {
	// StoreConfig overrides the history store's batching (zero: defaults).
	StoreConfig *history.StoreConfig
	// Version is the binary's version, shown by /status.
	Version string
	// Handlers are mounted on the query port beside the API (streaming's
	// server-sent events and streams).
	Handlers map[string]http.Handler
	// WrapBackend, when set, wraps the history backend the store commits
	// to (tests inject faults with it).
	WrapBackend func(history.Backend) history.Backend
	// Middleware wraps the pipeline's actors' Receive (tests inject
	// faults with it).
	Middleware []actor.ReceiverMiddleware
}

// role is a running Writer or Reader.
type role interface {
	parts() *node
	// stop takes the role down (its pipeline, servers and own
	// connections), leaving the stores open.
	stop(timeout time.Duration) error
}

// Service is a running marlowe-follower: its stores, its role, and the
// locks it holds while it runs.
type Service struct {
	role   role
	stores *stores.Stores
	locks  []*storelock.Lock // released last
}

// Start takes the store's in-use lock (reset refuses to delete a store in
// use) and, on the embedded store, its writer lock (a second process on a
// data directory is refused here, before it opens anything; on PostgreSQL
// the writer lease makes it a standby instead), opens the stores and
// starts the role. Stop it with Stop.
func Start(ctx context.Context, cfg *config.Config, log *zap.Logger, opts Options) (*Service, error) {
	lock, err := storelock.Shared(ctx, storelock.Store{DatabaseURL: cfg.Store.DatabaseURL, DataDir: cfg.Store.DataDir},
		storelock.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	s := &Service{locks: []*storelock.Lock{lock}}
	fail := func(err error) (*Service, error) {
		_ = s.release()
		return nil, err
	}
	if cfg.Store.DatabaseURL == "" && cfg.Role != config.RoleReader {
		wf, err := storelock.WriterFile(cfg.Store.DataDir)
		if err != nil {
			return fail(err)
		}
		s.locks = append(s.locks, wf)
	}
	if s.stores, err = stores.Open(ctx, cfg); err != nil {
		return fail(err)
	}
	if cfg.Role == config.RoleReader {
		s.role, err = startReader(ctx, cfg, log, opts, s.stores, nil)
	} else {
		s.role, err = startWriter(ctx, cfg, log, opts, s.stores)
	}
	if err != nil {
		return fail(err)
	}
	return s, nil
}

// QueryAddr returns the query API's address, or "" when it is off.
func (s *Service) QueryAddr() string { return s.role.parts().queryAddr() }

// StreamingAddr returns the WebSocket server's address, or "" when it is off.
func (s *Service) StreamingAddr() string { return s.role.parts().streamingAddr() }

// Handle returns the history store's read side.
func (s *Service) Handle() *history.Handle { return s.role.parts().pipe.Handle }

// Progress returns the follower's progress (a reader's stays empty).
func (s *Service) Progress() *chainsync.Progress { return s.role.parts().progress }

// Projection returns the contract projection (nil in a reader).
func (s *Service) Projection() *contracts.Store { return s.role.parts().pipe.Projection }

// Fatal receives the error that makes the service unable to go on: the
// pipeline stopped on its own (another writer holds the store,
// history.ErrAnotherWriter, or an actor that keeps failing), or this
// process lost the writer lease (storage.ErrLeaseLost; its commits
// fenced: history.ErrFenced); the caller stops the service and exits with
// it.
func (s *Service) Fatal() <-chan error { return s.role.parts().fatal }

// Stop takes the role down in order, committing what was received (the
// streaming server and the query API stop, the projection commits, the
// follower stops reading, the processor and the store drain their
// mailboxes and the store commits its last batch; a writer then lets its
// lease go), then closes the stores and lets the locks go.
func (s *Service) Stop(timeout time.Duration) error {
	return errors.Join(s.role.stop(timeout), s.release())
}

// release closes the stores and lets the locks go, the newest first.
func (s *Service) release() error {
	var errs []error
	if s.stores != nil {
		errs = append(errs, s.stores.Close())
	}
	for i := len(s.locks) - 1; i >= 0; i-- {
		errs = append(errs, s.locks[i].Release())
	}
	return errors.Join(errs...)
}
