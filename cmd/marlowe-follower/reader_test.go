package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/marlowe-follower/follower/history/historytest"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"

	"github.com/marlowe-follower/follower/history/storage/storagetest"
)

// testDatabaseURL returns MARLOWE_TEST_DATABASE_URL; without it the test
// is skipped, except under CI, where PostgreSQL tests must run.
func testDatabaseURL(t *testing.T) string {
	t.Helper()
	base := storagetest.DatabaseURL(t)
	return base
}

// wsCollector subscribes to a streaming port from a cursor and keeps every
// record it receives, acknowledging each batch. When the connection ends
// (the service restarted) it connects again and resumes from the cursor
// after the last batch it kept.
type wsCollector struct {
	mu       sync.Mutex
	got      []record.Record
	err      error
	last     int64
	start    string // the cursor the first subscribed frame gave
	cursor   string // where to resume
	resumes  int
	port     func() int
	connects int
}

func (c *wsCollector) run(ctx context.Context, port int, from string) {
	c.mu.Lock()
	c.cursor = from
	if c.port == nil {
		c.port = func() int { return port }
	}
	c.mu.Unlock()
	for ctx.Err() == nil {
		err := c.connection(ctx)
		if ctx.Err() != nil {
			return
		}
		var fatal *collectorError
		if errors.As(err, &fatal) {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
			return
		}
		c.mu.Lock()
		c.resumes++
		c.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// collectorError is a wrong answer, not a connection that ended.
type collectorError struct{ msg string }

func (e *collectorError) Error() string { return e.msg }

func (c *wsCollector) connection(ctx context.Context) error {
	c.mu.Lock()
	from, port := c.cursor, c.port()
	c.mu.Unlock()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, _, err := websocket.Dial(dctx, "ws://127.0.0.1:"+strconv.Itoa(port)+"/", nil)
	cancel()
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(64 << 20)
	if err := writeJSON(ctx, conn, protocol.Command{Type: protocol.TypeSubscribe, Stream: "all", From: from,
		BatchSize: 50, Filter: &protocol.Filter{All: true}}); err != nil {
		return err
	}
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return err
		}
		var fr protocol.Frame
		if err := json.Unmarshal(data, &fr); err != nil {
			return &collectorError{fmt.Sprintf("undecodable frame %q: %v", data, err)}
		}
		switch fr.Type {
		case protocol.TypeError:
			if fr.Stream != "" {
				return fmt.Errorf("stream error frame: %s", data) // shutting down: resume
			}
			return &collectorError{fmt.Sprintf("error frame: %s", data)}
		case protocol.TypeSubscribed:
			c.mu.Lock()
			if c.start == "" {
				c.start = fr.Cursor
			}
			c.connects++
			c.mu.Unlock()
			continue
		case protocol.TypeBatch:
		default:
			continue
		}
		c.mu.Lock()
		c.got = append(c.got, fr.Records...)
		if n := len(fr.Records); n > 0 {
			c.last = fr.Records[n-1].Seq
		}
		c.cursor = fr.Cursor
		c.mu.Unlock()
		if err := writeJSON(ctx, conn, protocol.Command{Type: protocol.TypeAck, Stream: "all", Batch: fr.Batch}); err != nil {
			return err
		}
	}
}

func (c *wsCollector) lastSeq() (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, c.err
}

// TestReaderServesTheWritersLog runs the built binary as a writer (role
// all on PostgreSQL, following an external devnet with rollbacks) and as
// a reader on the same database: a WebSocket subscriber on the reader,
// subscribed from the start while the writer follows, receives every
// record of the writer's log exactly once and equal to it, across a
// writer killed and replaced (the failover a standby makes) and a reader
// killed and restarted (the subscriber resumes from its cursor); minSeq on
// the reader answers at the writer's head. Short in CI;
// MARLOWE_TEST_LONG=1 follows a longer chain.
func TestReaderServesTheWritersLog(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	base := testDatabaseURL(t)
	bin := buildBinary(t)
	dbURL, _ := soakDatabase(t, base)
	dir := t.TempDir()
	socket := filepath.Join(dir, "node.socket")
	writer, blocks := startWriterOnDevnet(t, bin, dbURL, socket, 240, 40, 15)
	// The reader starts once the writer has made the schema.
	waitUntil(t, time.Minute, "the writer answers", func() bool { _, err := writer.status(); return err == nil })
	reader := startService(t, bin, "reader", dbURL, "")
	waitUntil(t, time.Minute, "the reader answers", func() bool { _, err := reader.status(); return err == nil })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var current atomic.Pointer[child]
	current.Store(reader)
	col := &wsCollector{port: func() int { return current.Load().sport }}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		col.run(ctx, 0, "0")
	}()
	committed := func(at uint64) func() bool {
		return func() bool {
			st, err := writer.status()
			return err == nil && st.Committed.BlockNo >= at
		}
	}

	// The writer is killed while it follows; another takes over the store.
	waitUntil(t, 3*time.Minute, "the writer a third of the way", committed(blocks/3))
	writer.kill(t)
	writer = startService(t, bin, "all", dbURL, socket)
	// The reader is killed; another serves on its ports, and the
	// subscriber resumes from its cursor.
	waitUntil(t, 3*time.Minute, "the new writer two thirds of the way", committed(2*blocks/3))
	reader.kill(t)
	reader = startServiceOn(t, bin, "reader", dbURL, "", reader.qport, reader.sport)
	current.Store(reader)

	// The chain at rest: the writer has committed its last block.
	head := writer.headAt(t, blocks)
	waitUntil(t, time.Minute, "the subscriber on the reader at the writer's head", func() bool {
		last, err := col.lastSeq()
		if err != nil {
			t.Fatalf("subscriber: %v", err)
		}
		return last >= head
	})
	code, hdr, err := getHeader(reader.base+"/contracts?minSeq="+strconv.FormatInt(head, 10), "X-Marlowe-Seq")
	if err != nil || code != http.StatusOK {
		t.Fatalf("minSeq=%d on the reader: %d, %v", head, code, err)
	}
	if seq, _ := strconv.ParseInt(hdr, 10, 64); seq < head {
		t.Fatalf("minSeq=%d on the reader answered at seq %s", head, hdr)
	}
	rst, err := reader.status()
	if err != nil || rst.Role != "reader" || rst.Reader == nil || rst.Reader.Head != head || rst.Reader.WriterHead != head ||
		rst.Committed.BlockNo != blocks {
		t.Fatalf("the reader's status: %+v, %v (want head %d, committed block %d)", rst, err, head, blocks)
	}
	col.mu.Lock()
	resumes := col.resumes
	col.mu.Unlock()
	if resumes == 0 {
		t.Fatal("the subscriber never resumed: the reader's restart did not reach it")
	}
	cancel()
	wg.Wait()

	log, _ := soakLog(t, "postgres", "", dbURL)
	if int64(len(log)) != head {
		t.Fatalf("the log holds %d records, the writer's head is %d", len(log), head)
	}
	markers := historytest.RollbackMarkers(log)
	if markers == 0 {
		t.Fatal("the devnet rolled nothing back")
	}
	if len(col.got) != len(log) {
		t.Fatalf("the subscriber on the reader got %d records, the log holds %d", len(col.got), len(log))
	}
	for i := range log {
		if got, want := &col.got[i], &log[i]; got.Seq != want.Seq || digest(got) != digest(want) {
			t.Fatalf("record %d on the reader: %+v, the writer's log: %+v", i, got, want)
		}
	}
	t.Logf("%d records (%d rollbacks) over %d blocks, each once on the reader's WebSocket (%d resumes)", len(log), markers, blocks, resumes)
}

// getHeader GETs url and returns the status code and one header.
func getHeader(url, name string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header.Get(name), nil
}

// startWriterOnDevnet starts a devnet process on socket (blocks blocks,
// 2,000 with MARLOWE_TEST_LONG=1, at rate a second, a rollback every 10,
// 60% Marlowe, from seed) and a writer (role all) following it into
// dbURL; it returns the writer and the number of blocks.
func startWriterOnDevnet(t *testing.T, bin, dbURL, socket string, blocks uint64, rate, seed int) (*child, uint64) {
	t.Helper()
	if os.Getenv("MARLOWE_TEST_LONG") == "1" {
		blocks = 2000
	}
	startDevnetProc(t, bin, socket, "devnet", "--socket", socket, "--block-rate", strconv.Itoa(rate), "--blocks", strconv.FormatUint(blocks, 10),
		"--rollback-every", "10", "--marlowe-share", "0.6", "--seed", strconv.Itoa(seed), "--log-level", "error")
	return startService(t, bin, "all", dbURL, socket), blocks
}
