package streaming

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/auth"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

// EventsHandler serves the history as Server-Sent Events, for clients that
// cannot speak WebSocket; the query API mounts it at GET /events. The
// filter is given by query parameters (protocol.FilterFromQuery: the
// filter vocabulary contractId, roleCurrency, tag, partyAddress,
// partyRole, kind, each repeatable, and all; contract and rolesCurrency
// are aliases) and the starting point by from (origin, tip or a cursor);
// other parameters are refused (400 unknown_parameter), but access_token;
// a Last-Event-ID header (sent by EventSource when it reconnects) takes
// precedence over from. Each record is one event:
//
//	id: CURSOR          the position right after this record
//	event: record
//	data: RECORD-JSON
//
// and a heartbeat event with the tip comes every HeartbeatInterval. There
// are no acks: a client resumes from the last id it received. A client
// that does not read within WriteTimeout is cut off.
func (s *Server) EventsHandler() http.Handler {
	return http.HandlerFunc(s.serveEvents)
}

func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use GET")
		return
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_query", "malformed query string: "+err.Error())
		return
	}
	if err := checkParams(q, eventsParams, "from"); err != nil {
		writeError(w, http.StatusBadRequest, err.code, err.msg)
		return
	}
	wf, err := protocol.FilterFromQuery(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, protocol.CodeBadFilter, err.Error())
		return
	}
	filter, err := wf.History()
	if err != nil {
		writeError(w, http.StatusBadRequest, protocol.CodeBadFilter, err.Error())
		return
	}
	fromText, fromIn := q.Get("from"), "from"
	if id := strings.TrimSpace(r.Header.Get("Last-Event-ID")); id != "" {
		fromText, fromIn = id, "Last-Event-ID"
	}
	from, err := protocol.ParseFromIn(fromIn, fromText)
	if err != nil {
		writeError(w, http.StatusBadRequest, protocol.CodeBadCursor, err.Error())
		return
	}
	start, err := s.startCursor(filter, from)
	if err != nil {
		var se *subscribeError
		if errors.As(err, &se) {
			writeError(w, http.StatusBadRequest, se.code, se.msg)
			return
		}
		writeError(w, http.StatusInternalServerError, protocol.CodeInternal, "the subscription could not be set up")
		return
	}
	who, ok := s.authenticate(w, r)
	if !ok {
		return
	}
	if !who.Allows(auth.ScopeSubscribe) {
		writeError(w, http.StatusForbidden, protocol.CodeForbidden, "this token has no subscribe scope")
		return
	}
	if !s.admit(w) {
		return
	}
	defer s.leave()
	s.m.sseClients.Inc()
	defer s.m.sseClients.Dec()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	ev := &eventWriter{s: s, rc: http.NewResponseController(w), bw: bufio.NewWriterSize(w, 32<<10)}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-s.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()
	var wg sync.WaitGroup
	p := startPump(ctx, &wg, s.h.Subscribe(filter, record.From{Kind: record.FromCursor, Cursor: start}))
	defer p.stop()
	if err := ev.comment("subscribed from " + start.String()); err != nil {
		return
	}
	tick := time.NewTicker(s.cfg.HeartbeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := ev.heartbeat(); err != nil {
				return
			}
		case c := <-p.request():
			p.taken()
			if c.err != nil {
				if ctx.Err() == nil && !errors.Is(c.err, history.ErrStoreStopped) {
					s.log.Error("event stream: reading the history failed", zap.Error(c.err))
				}
				return
			}
			if err := ev.records(&c); err != nil {
				if errors.Is(err, errEventTimeout) {
					s.m.slowDropped.Inc()
					s.m.disconnects.WithLabelValues(protocol.CloseSlowConsumer).Inc()
				}
				return
			}
		}
	}
}

// eventsParams are the query parameters of GET /events: the filter's
// (protocol.QueryNames), from, and access_token.
var eventsParams = append(protocol.QueryNames(), "from", "access_token")

// paramError is a query string a handler refuses: its code and message.
type paramError struct{ code, msg string }

// checkParams refuses names outside allowed (unknown_parameter, as the
// query API answers) and a repeat of a name of once (repeated_parameter).
func checkParams(q url.Values, allowed []string, once ...string) *paramError {
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !slices.Contains(allowed, name) {
			shown := make([]string, 0, len(allowed))
			for _, a := range allowed {
				if a != "access_token" {
					shown = append(shown, a)
				}
			}
			takes := "no parameters"
			if len(shown) > 0 {
				takes = strings.Join(shown, ", ")
			}
			return &paramError{"unknown_parameter", fmt.Sprintf("unknown parameter %q: this resource takes %s", clip(name), takes)}
		}
		if slices.Contains(once, name) && len(q[name]) > 1 {
			return &paramError{"repeated_parameter", fmt.Sprintf("parameter %s is given %d times; it takes one value", name, len(q[name]))}
		}
	}
	return nil
}

// clip shortens client text quoted in a message.
func clip(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

var errEventTimeout = errors.New("event stream: write timed out")

// eventWriter writes events with a write deadline per batch.
type eventWriter struct {
	s  *Server
	rc *http.ResponseController
	bw *bufio.Writer
}

// begin sets the deadline of the writes that follow.
func (e *eventWriter) begin() {
	_ = e.rc.SetWriteDeadline(time.Now().Add(e.s.cfg.WriteTimeout))
}

func (e *eventWriter) flush() error {
	if err := e.bw.Flush(); err != nil {
		return e.classify(err)
	}
	if err := e.rc.Flush(); err != nil {
		return e.classify(err)
	}
	return nil
}

func (e *eventWriter) classify(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timeout") {
		return errEventTimeout
	}
	return err
}

func (e *eventWriter) comment(text string) error {
	e.begin()
	fmt.Fprintf(e.bw, ": %s\n\n", text)
	return e.flush()
}

func (e *eventWriter) heartbeat() error {
	e.begin()
	e.bw.WriteString("event: heartbeat\ndata: ")
	e.bw.Write(e.s.tipJSON())
	e.bw.WriteString("\n\n")
	return e.flush()
}

func (e *eventWriter) records(c *chunk) error {
	e.begin()
	var b []byte
	head := e.s.head()
	for i := range c.records {
		b = e.s.enc.AppendRecord(b[:0], &c.records[i], head)
		e.bw.WriteString("id: ")
		e.bw.WriteString(c.cursorAfter(i).String())
		e.bw.WriteString("\nevent: record\ndata: ")
		e.bw.Write(b)
		e.bw.WriteString("\n\n")
		if e.bw.Buffered() > 16<<10 {
			if err := e.flush(); err != nil {
				return err
			}
			e.begin()
		}
	}
	return e.flush()
}
