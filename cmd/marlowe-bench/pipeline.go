package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/service"
)

// storeSpec says where a service keeps its history: an embedded SQLite
// store in DataDir, or the PostgreSQL database DatabaseURL (named DBName).
type storeSpec struct {
	DataDir     string `json:"dataDir,omitempty"`
	DatabaseURL string `json:"databaseURL,omitempty"`
	DBName      string `json:"dbName,omitempty"`
}

// backendName names the store.
func (s storeSpec) backendName() string {
	if s.DatabaseURL != "" {
		return "postgresql"
	}
	return "sqlite"
}

// size returns the store's size on disk: the SQLite files, or the
// PostgreSQL database.
func (s storeSpec) size(ctx context.Context) int64 {
	if s.DatabaseURL == "" {
		return dirSize(s.DataDir)
	}
	conn, err := pgx.Connect(ctx, s.DatabaseURL)
	if err != nil {
		return 0
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, "SELECT pg_database_size(current_database())").Scan(&n); err != nil {
		return 0
	}
	return n
}

// serviceConfig returns the service's configuration: its defaults, the
// devnet node at socket, the store, and the query API and the streaming
// server on free loopback ports.
func serviceConfig(socket string, store storeSpec) (*config.Config, error) {
	l, err := config.Load(nil, "", func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, err
	}
	cfg := l.Config
	cfg.Node.Socket, cfg.Node.NetworkMagic = socket, devnet.NetworkMagic
	cfg.Store.DataDir, cfg.Store.DatabaseURL = store.DataDir, store.DatabaseURL
	qport, sport, err := servicePorts()
	if err != nil {
		return nil, err
	}
	cfg.Query.Host, cfg.Query.Port = "127.0.0.1", qport
	cfg.Streaming.Host, cfg.Streaming.Port = "127.0.0.1", sport
	return &cfg, nil
}

// servicePorts returns two ports that were free on the loopback interface,
// for a service's query API and streaming server.
func servicePorts() (query, streaming int, err error) {
	if query, err = freePort(); err != nil {
		return 0, 0, err
	}
	streaming, err = freePort()
	return query, streaming, err
}

// freePort returns a TCP port that was free on the loopback interface.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startService starts the whole pipeline (follower, processor, history
// store, contract projection, query API, streaming server) as the binary's
// run command does.
// A port freePort found free can be taken before the service binds it (by
// the ephemeral port of an outgoing connection, to PostgreSQL for one): the
// service is then started again on other ports, a few times.
func startService(ctx context.Context, socket string, store storeSpec) (*service.Service, error) {
	for attempt := 1; ; attempt++ {
		cfg, err := serviceConfig(socket, store)
		if err != nil {
			return nil, err
		}
		svc, err := service.Start(ctx, cfg, zap.NewNop(), service.Options{Version: "marlowe-bench"})
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || attempt == 3 {
			return svc, err
		}
	}
}

// synced reports whether the service has committed every block up to tip
// and its contract projection has applied every record.
func synced(svc *service.Service, tip uint64) bool {
	p := svc.Progress().Snapshot()
	st := svc.Handle().Stats()
	return p.Point.BlockNo >= tip && st.BlocksCommitted.Load() >= p.Blocks &&
		svc.Projection().Applied().Seq >= st.Head.Load()
}

// waitSynced waits until the service is synced to tip, reporting progress
// every few seconds, for at most limit.
func waitSynced(ctx context.Context, svc *service.Service, tip uint64, label string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	report := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !synced(svc, tip) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			p := svc.Progress().Snapshot()
			return fmt.Errorf("%s: not synced after %s (block %d of %d, last error %q, projection error %q)",
				label, limit, p.Point.BlockNo, tip, p.LastError, svc.Projection().LastError())
		}
		if time.Now().After(report) {
			report = time.Now().Add(5 * time.Second)
			progress("  %s: block %d of %d, %d records", label, svc.Progress().Snapshot().Point.BlockNo, tip,
				svc.Handle().Stats().RecordsCommitted.Load())
		}
	}
	return nil
}

// pgAdmin creates and drops the benchmark's PostgreSQL databases through
// the server at an administrative URL.
type pgAdmin struct {
	url string
}

// checkPostgres connects to adminURL to see whether PostgreSQL can be used.
func checkPostgres(ctx context.Context, adminURL string) (*pgAdmin, string, error) {
	if adminURL == "" {
		return nil, "", errors.New("no PostgreSQL URL (--pg-url)")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, "", err
	}
	defer conn.Close(ctx)
	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return nil, "", err
	}
	return &pgAdmin{url: adminURL}, version, nil
}

// create makes a fresh database and returns its URL and name.
func (a *pgAdmin) create(ctx context.Context, label string) (storeSpec, error) {
	name := fmt.Sprintf("marlowe_bench_%d_%s_%d", os.Getpid(), label, time.Now().UnixNano()%1e9)
	conn, err := pgx.Connect(ctx, a.url)
	if err != nil {
		return storeSpec{}, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return storeSpec{}, fmt.Errorf("creating database %s: %w", name, err)
	}
	u, err := url.Parse(a.url)
	if err != nil {
		return storeSpec{}, err
	}
	u.Path = "/" + name
	return storeSpec{DatabaseURL: u.String(), DBName: name}, nil
}

// drop removes a database made by create.
func (a *pgAdmin) drop(ctx context.Context, s storeSpec) error {
	if s.DBName == "" || !strings.HasPrefix(s.DBName, "marlowe_bench_") {
		return nil
	}
	conn, err := pgx.Connect(ctx, a.url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{s.DBName}.Sanitize()+" WITH (FORCE)")
	return err
}
