package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

// The soak's clients: WebSocket subscribers that drop their connection and
// resume, fuzzed HTTP requests and hostile WebSocket frames (soak_test.go).

// soakSubscriber is a WebSocket subscriber that drops its connection at
// random (mid-batch too) and resumes from its cursor. It checks, per
// connection, that seqs only go up, and keeps a digest of every record
// received (a long soak receives millions).
type soakSubscriber struct {
	name    string
	filter  protocol.Filter
	durable bool
	row     *soakRow
	rng     *rand.Rand

	mu       sync.Mutex
	received map[int64]recordDigest // each seq's last copy
	problems []string
	cursor   string
	lastSeq  atomic.Int64
}

func (s *soakSubscriber) filtered() bool { return !s.filter.All }

func (s *soakSubscriber) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.problems) < 20 {
		s.problems = append(s.problems, fmt.Sprintf(format, args...))
	}
}

func (s *soakSubscriber) run(ctx context.Context, port int) {
	s.cursor = "0"
	for ctx.Err() == nil {
		s.connection(ctx, port)
		if ctx.Err() == nil {
			s.row.resumes.Add(1)
			pace(ctx, time.Duration(s.rng.IntN(200))*time.Millisecond)
		}
	}
}

// connection subscribes once and reads until the connection ends or this
// subscriber decides to drop it.
func (s *soakSubscriber) connection(ctx context.Context, port int) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	c, _, err := websocket.Dial(dctx, "ws://127.0.0.1:"+strconv.Itoa(port)+"/", nil)
	cancel()
	if err != nil {
		return // the service is down: try again
	}
	defer c.CloseNow()
	c.SetReadLimit(64 << 20)
	name := s.name
	cmd := protocol.Command{Type: protocol.TypeSubscribe, Stream: name, From: s.cursor, BatchSize: 1 + s.rng.IntN(300)}
	if s.durable {
		// The stream keeps its cursor in the service; the client resumes
		// it by name, and the service decides where it continues.
		cmd.Stream, cmd.Durable, cmd.From = "soak-durable", true, ""
		if s.cursor == "0" {
			cmd.From = "0"
		}
		name = cmd.Stream
	}
	f := s.filter
	cmd.Filter = &f
	if err := writeJSON(ctx, c, cmd); err != nil {
		return
	}
	dropAfter := s.rng.IntN(40) // batches before this connection is dropped
	var last int64 = -1         // newest seq received on this connection
	for n := 0; ; n++ {
		_, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		var fr protocol.Frame
		if err := json.Unmarshal(data, &fr); err != nil {
			s.problem("undecodable frame %q: %v", data, err)
			return
		}
		switch fr.Type {
		case protocol.TypeSubscribed:
			// Where the stream starts: nothing at or before it may come.
			start, err := cursorSeq(fr.Cursor)
			if err != nil {
				s.problem("subscribed with cursor %q: %v", fr.Cursor, err)
				return
			}
			if !s.durable {
				if want, _ := cursorSeq(cmd.From); start != want {
					s.problem("subscribed from %q, the server starts at %q", cmd.From, fr.Cursor)
				}
			}
			last = start
			continue
		case protocol.TypeError:
			if fr.Stream != "" {
				return // shutting down, deleted, ...: reconnect
			}
			continue
		case protocol.TypeBatch:
		default:
			continue
		}
		s.mu.Lock()
		for _, r := range fr.Records {
			if r.Seq <= last {
				s.problems = append(s.problems, fmt.Sprintf("seq %d after %d on one connection (its start or its last record): a duplicate or a step back", r.Seq, last))
			}
			last = r.Seq
			if s.received == nil {
				s.received = map[int64]recordDigest{}
			}
			s.received[r.Seq] = digest(&r)
		}
		s.mu.Unlock()
		if n >= dropAfter && s.rng.IntN(3) == 0 {
			return // dropped before the ack: these records come again
		}
		if err := writeJSON(ctx, c, protocol.Command{Type: protocol.TypeAck, Stream: name, Batch: fr.Batch}); err != nil {
			return
		}
		s.mu.Lock()
		s.cursor = fr.Cursor
		s.mu.Unlock()
		if len(fr.Records) > 0 {
			s.lastSeq.Store(fr.Records[len(fr.Records)-1].Seq)
		}
		if s.durable {
			s.row.durableAcks.Add(1)
		}
		if n >= dropAfter {
			return // dropped right after an ack
		}
	}
}

// check compares what the subscriber received with the log: every
// matching record once (records received again because their batch was
// never acknowledged are the at-least-once redelivery, not duplicates).
func (s *soakSubscriber) check(t *testing.T, log []record.Record) (lost, duplicated int) {
	t.Helper()
	for _, p := range s.problems {
		t.Errorf("subscriber %s: %s", s.name, p)
	}
	// Each seq's last copy (a batch dropped before its ack comes again).
	seen := maps.Clone(s.received)
	for _, r := range log {
		if s.filtered() && !matchesKinds(s.filter, &r) {
			continue
		}
		got, ok := seen[r.Seq]
		if !ok {
			lost++
			if lost <= 3 {
				t.Errorf("subscriber %s never received seq %d (%s)", s.name, r.Seq, brief(&r))
			}
			continue
		}
		if got != digest(&r) {
			t.Errorf("subscriber %s: seq %d received with other contents than logged (%s)", s.name, r.Seq, brief(&r))
		}
		delete(seen, r.Seq)
	}
	duplicated = len(seen) // received but not in the log (or not matching)
	if duplicated > 0 {
		t.Errorf("subscriber %s received %d records that are not in the log or do not match its filter", s.name, duplicated)
	}
	if len(s.received) == 0 {
		t.Errorf("subscriber %s received nothing", s.name)
	}
	return lost, duplicated
}

// matchesKinds is the kind filter: a rolled_back record passes only when
// the list names rolled_back (docs/streaming.md, "Filters").
func matchesKinds(f protocol.Filter, r *record.Record) bool {
	for _, k := range f.Kinds {
		if k == string(r.Kind) {
			return true
		}
	}
	return false
}

func writeJSON(ctx context.Context, c *websocket.Conn, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return c.Write(wctx, websocket.MessageText, data)
}

// soakHTTPFuzz sends random requests to the query port: known routes with
// odd ids, parameters and Range headers, and paths that are not routes.
func soakHTTPFuzz(ctx context.Context, base string, row *soakRow, rng *rand.Rand) {
	client := &http.Client{Timeout: 10 * time.Second}
	ids := []string{"", "x", "%00", "00#0", strings.Repeat("ab", 32) + "#1", strings.Repeat("f", 64) + "#99999999999",
		"../../etc/passwd", "%ff%fe", strings.Repeat("a", 5000)}
	params := []string{"", "?limit=-1", "?limit=1000000", "?status=closed", "?status=bogus", "?roleCurrency=zz", "?tag=a&tag=b",
		"?partyAddress=addr_test1", "?minSeq=99999999", "?minSeq=-5", "?after=abc", "?validityStart=1&validityEnd=0", "?kind=nope", "?from=origin"}
	paths := []string{"/contracts/%s", "/contracts/%s/transactions", "/contracts/%s/transactions/%s", "/contracts/%s/next",
		"/contracts/%s/history", "/payouts/%s", "/withdrawals/%s", "/runtime/contracts/%s", "/runtime/contracts/%s/next",
		"/runtime/payouts/%s", "/contracts", "/payouts", "/withdrawals", "/runtime/contracts", "/runtime/withdrawals",
		"/status", "/readyz", "/healthz", "/openapi.json", "/streams", "/nope/%s", "/%s"}
	ranges := []string{"", "contractId", "contractId ;limit 3", "contractId x;limit 0", "bogus", "contractId;order sideways", "contractId;offset 99999999"}
	for ctx.Err() == nil {
		p := paths[rng.IntN(len(paths))]
		for strings.Contains(p, "%s") {
			p = strings.Replace(p, "%s", ids[rng.IntN(len(ids))], 1)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+p+params[rng.IntN(len(params))], nil)
		if err != nil {
			continue // not a URL at all: nothing to send
		}
		if r := ranges[rng.IntN(len(ranges))]; r != "" {
			req.Header.Set("Range", r)
		}
		resp, err := client.Do(req)
		if err != nil {
			pace(ctx, 20*time.Millisecond) // the service is down
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 2000))
		_ = resp.Body.Close()
		row.requests.Add(1)
		switch {
		case resp.StatusCode == http.StatusServiceUnavailable:
			row.unavailable.Add(1)
		case resp.StatusCode >= 500:
			if row.server5xx.Add(1) <= 5 {
				row.mu.Lock()
				row.failures = append(row.failures, fmt.Sprintf("GET %s (Range %q): %d %s", req.URL.RequestURI(), req.Header.Get("Range"), resp.StatusCode, body))
				row.mu.Unlock()
			}
		}
		pace(ctx, time.Duration(rng.IntN(5))*time.Millisecond)
	}
}

// soakHostile sends hostile frames on WebSocket connections: binary
// frames, broken JSON, unknown types, oversized frames, floods. Each must
// get an error frame or a close, never take the service down.
func soakHostile(ctx context.Context, port int, row *soakRow, rng *rand.Rand) {
	frames := [][]byte{[]byte("{"), []byte(`{"type":"subscribe"}`), []byte(`{"type":"ack","stream":"nope","batch":-1}`),
		[]byte(`{"type":"subscribe","stream":"a","filter":{"all":true},"batchSize":100000000}`), []byte(`{"type":"zzz"}`),
		[]byte(`{"type":"subscribe","stream":"` + strings.Repeat("x", 500) + `","filter":{"all":true}}`),
		[]byte(`{"type":"subscribe","stream":"d","durable":true,"filter":{"kind":["bogus"]}}`), bytes.Repeat([]byte("["), 100000)}
	for ctx.Err() == nil {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		c, _, err := websocket.Dial(dctx, "ws://127.0.0.1:"+strconv.Itoa(port)+"/", nil)
		cancel()
		if err != nil {
			pace(ctx, 50*time.Millisecond) // the service is down
			continue
		}
		go func() {
			for {
				if _, _, err := c.Read(ctx); err != nil {
					return
				}
			}
		}()
		for range 1 + rng.IntN(30) {
			typ, data := websocket.MessageText, frames[rng.IntN(len(frames))]
			if rng.IntN(6) == 0 {
				typ = websocket.MessageBinary
			}
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			err := c.Write(wctx, typ, data)
			cancel()
			if err != nil {
				break
			}
			row.hostile.Add(1)
		}
		_ = c.CloseNow()
		pace(ctx, time.Duration(rng.IntN(100))*time.Millisecond)
	}
}

// brief names a record in a line.
func brief(r *record.Record) string {
	s := fmt.Sprintf("%s block %d %x", r.Kind, r.Block.BlockNo, r.Block.Hash[:4])
	if r.Kind != record.KindRolledBack {
		s += fmt.Sprintf(" tx %x#%d", r.TxID[:4], r.TxIndex)
	}
	if r.RolledBackBy != nil {
		s += fmt.Sprintf(" rolledBackBy %d", *r.RolledBackBy)
	}
	return s
}

// standing returns the records no rollback undid, without rollback marks.
func standing(log []record.Record) []record.Record {
	var out []record.Record
	for _, r := range log {
		if r.Kind != record.KindRolledBack && r.RolledBackBy == nil {
			out = append(out, r)
		}
	}
	return out
}

// cursorSeq returns the seq of a cursor, "SEQ" or "SNAPSHOT:SEQ".
func cursorSeq(c string) (int64, error) {
	if i := strings.LastIndexByte(c, ':'); i >= 0 {
		c = c[i+1:]
	}
	return strconv.ParseInt(c, 10, 64)
}

// recordDigest identifies a record's contents (without its rollback mark,
// which a record gains when a later rollback undoes it).
type recordDigest [sha256.Size]byte

func digest(r *record.Record) recordDigest {
	c := *r
	c.RolledBackBy = nil
	data, err := json.Marshal(&c)
	if err != nil {
		panic(err)
	}
	return sha256.Sum256(data)
}
