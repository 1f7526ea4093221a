package streaming_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/streamtest"
)

// sseEvent is one Server-Sent Event.
type sseEvent struct{ id, event, data string }

// readEvents reads events until n records were seen or the body ends.
func readEvents(t *testing.T, resp *http.Response, n int) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	records := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for records < n && sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.event != "" {
				out = append(out, cur)
				if cur.event == "record" {
					records++
				}
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
	return out
}

// TestServerSentEvents follows the history over SSE, disconnects, and
// resumes with Last-Event-ID: the records continue exactly after the last
// event received, live records included.
func TestServerSentEvents(t *testing.T) {
	sf := newSeedFixture(t, 60)
	ts := httptest.NewServer(sf.srv.EventsHandler())
	defer ts.Close()
	filter := record.Filter{Kinds: []record.Kind{record.KindContractCreated, record.KindInputsApplied}}
	start := record.Cursor{Snapshot: sf.h.Handle.Head()}
	want := sf.expected(t, filter, start)

	get := func(lastID string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/events?kind=contract_created&kind=inputs_applied", nil)
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%s %s", resp.Status, resp.Header.Get("Content-Type"))
		}
		return resp
	}
	var got streamtest.Collector
	add := func(evs []sseEvent) string {
		last := ""
		for _, e := range evs {
			if e.event != "record" {
				continue
			}
			var r record.Record
			if err := json.Unmarshal([]byte(e.data), &r); err != nil {
				t.Fatal(err)
			}
			if err := got.Add([]record.Record{r}); err != nil {
				t.Fatal(err)
			}
			last = e.id
		}
		return last
	}
	resp := get("")
	last := add(readEvents(t, resp, len(want)/2))
	resp.Body.Close()
	// New records while disconnected, then resume.
	if err := sf.feed.UntilRecords(context.Background(), sf.h.Handle.Head()+20); err != nil {
		t.Fatal(err)
	}
	want = sf.expected(t, filter, start)
	resp = get(last)
	defer resp.Body.Close()
	add(readEvents(t, resp, len(want)-len(got.Records)))
	if err := streamtest.Same(got.Records, want); err != nil || got.Dups != 0 {
		t.Fatalf("%v (%d duplicates)", err, got.Dups)
	}
	// Heartbeats come while idle.
	done := make(chan []sseEvent)
	go func() {
		var evs []sseEvent
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() == "event: heartbeat" {
				evs = append(evs, sseEvent{event: "heartbeat"})
				break
			}
		}
		done <- evs
	}()
	select {
	case evs := <-done:
		if len(evs) != 1 {
			t.Fatal("no heartbeat")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no heartbeat within 5 s")
	}
	for _, bad := range []string{"/events", "/events?all=true&from=nope", "/events?kind=x", "/events?all=true&from=999999"} {
		r, err := http.Get(ts.URL + bad)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %s", bad, r.Status)
		}
	}
}

// TestEventsBadLastEventID: a Last-Event-ID that is no cursor is refused
// as bad_cursor naming the header it came in, not from.
func TestEventsBadLastEventID(t *testing.T) {
	sf := newSeedFixture(t, 5)
	ts := httptest.NewServer(sf.srv.EventsHandler())
	defer ts.Close()
	for _, c := range []struct{ header, query, want string }{
		{"nope", "", `Last-Event-ID "nope": want origin, tip or a cursor`},
		{"", "&from=nope", `from "nope": want origin, tip or a cursor`},
	} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/events?all=true"+c.query, nil)
		if c.header != "" {
			req.Header.Set("Last-Event-ID", c.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Code, Message string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || body.Code != protocol.CodeBadCursor || !strings.HasPrefix(body.Message, c.want) {
			t.Errorf("Last-Event-ID %q, query %q: %d %+v, want 400 bad_cursor %q", c.header, c.query, resp.StatusCode, body, c.want)
		}
	}
}
