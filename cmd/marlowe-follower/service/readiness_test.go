package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/config"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/internal/testport"
	"github.com/marlowe-follower/follower/cmd/marlowe-follower/service"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/query"

	"github.com/marlowe-follower/follower/chainsync/waitfor"
)

// failingBackend fails every commit while on is set, as a full disk does.
type failingBackend struct {
	history.Backend
	on       atomic.Bool
	failures atomic.Int64
}

func (b *failingBackend) Commit(ctx context.Context, p *history.CommitParams) error {
	if b.on.Load() {
		b.failures.Add(1)
		return errors.New("sqlitestore: commit: database or disk is full (SQLITE_FULL)")
	}
	return b.Backend.Commit(ctx, p)
}

func getReady(t *testing.T, base string) (int, query.Readiness) {
	t.Helper()
	res, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var r query.Readiness
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return res.StatusCode, r
}

func getBody(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return string(body)
}

// eventually waits until cond holds and returns how long it took; the test fails after d.
var eventually = waitfor.Until // (t, d, what, cond)

// TestReadyWhileCommitsFail runs the whole service on a growing devnet
// with a history backend that refuses commits on demand (a full disk):
// /readyz is 503 commit_failing while they fail, with /status saying why
// since when, and 200 again once a commit succeeds.
func TestReadyWhileCommitsFail(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	socket := filepath.Join(dir, "node.socket")
	gcfg := devnet.DefaultGeneratorConfig()
	gcfg.RollbackEvery = 0
	dn, err := devnet.Start(ctx, devnet.RunConfig{SocketPath: socket, Generator: gcfg, BlockRate: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer dn.Close()
	l, err := config.Load(nil, "", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cfg := l.Config
	cfg.Node.Socket, cfg.Node.NetworkMagic = socket, devnet.NetworkMagic
	cfg.Store.DataDir = filepath.Join(dir, "data")
	cfg.Query.Host, cfg.Query.Port, cfg.Streaming.Port = "127.0.0.1", testport.Free(t), 0
	fb := &failingBackend{}
	svc, err := service.Start(ctx, &cfg, zap.NewNop(), service.Options{Version: "test",
		WrapBackend: func(b history.Backend) history.Backend { fb.Backend = b; return fb }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = svc.Stop(10 * time.Second) }()
	base := "http://" + svc.QueryAddr()
	// (The limits of these waits are for a loaded machine, on which the
	// service may take a while to reach the tip; what is checked is the
	// states, not how soon they come.)
	waitfor.NoError(t, 2*time.Minute, func() error {
		if code, r := getReady(t, base); code != http.StatusOK {
			return fmt.Errorf("not ready: /readyz %d %s", code, r.Reasons)
		}
		return nil
	})

	fb.on.Store(true)
	took := eventually(t, time.Minute, "503 commit_failing", func() bool {
		code, r := getReady(t, base)
		_, failing := r.NotReady["commit_failing"]
		return code == http.StatusServiceUnavailable && failing
	})
	t.Logf("503 commit_failing %s after commits started failing", took.Round(time.Millisecond))
	_, r := getReady(t, base)
	if !strings.Contains(r.NotReady["commit_failing"].Message, "database or disk is full") {
		t.Fatalf("commit_failing: %+v", r.NotReady["commit_failing"])
	}
	var st struct {
		CommitError *struct {
			Message  string    `json:"message"`
			Since    time.Time `json:"since"`
			Failures uint64    `json:"failures"`
		} `json:"commitError"`
		Committed struct {
			BlockNo uint64 `json:"blockNo"`
		} `json:"committedPoint"`
		Follower struct {
			BlockNo uint64 `json:"blockNo"`
		} `json:"followerPoint"`
	}
	// Two seconds of failures: every probe says so, the committed point
	// stays while blocks are still received.
	waitfor.Holds(t, 2*time.Second, "503 commit_failing", func() bool {
		if code, r := getReady(t, base); code != http.StatusServiceUnavailable || r.NotReady["commit_failing"].Message == "" {
			t.Fatalf("ready while commits fail: %d %v", code, r)
		}
		return true
	})
	if err := json.Unmarshal([]byte(getBody(t, base+"/status")), &st); err != nil {
		t.Fatal(err)
	}
	if st.CommitError == nil || st.CommitError.Failures == 0 || time.Since(st.CommitError.Since) < 2*time.Second ||
		!strings.Contains(st.CommitError.Message, "disk is full") || st.Follower.BlockNo <= st.Committed.BlockNo {
		t.Fatalf("status while failing: %+v", st)
	}
	if m := getBody(t, base+"/metrics"); !strings.Contains(m, "marlowe_history_commit_failing 1") ||
		!strings.Contains(m, `marlowe_not_ready{reason="commit_failing"} 1`) {
		t.Fatal("metrics do not show the failing commits")
	}
	fb.on.Store(false)
	took = eventually(t, 2*time.Minute, "ready again", func() bool { code, _ := getReady(t, base); return code == http.StatusOK })
	t.Logf("200 again %s after commits succeeded again (%d commits refused)", took.Round(time.Millisecond), fb.failures.Load())
	st.CommitError = nil // absent from the answer: not overwritten by Unmarshal
	if err := json.Unmarshal([]byte(getBody(t, base+"/status")), &st); err != nil {
		t.Fatal(err)
	}
	if st.CommitError != nil {
		t.Fatalf("commit error after recovery: %+v", st.CommitError)
	}
}
