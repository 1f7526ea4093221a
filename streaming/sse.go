package streaming

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/auth"
	"github.com/marlowe-follower/follower/streaming/conn"
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
	req, ok := s.eventsRequest(w, r)
	if !ok || !s.admit(w) {
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		s.leave()
		return
	}
	e := conn.NewEvents(&s.conns, r.Context(), s.nextID.Add(1), req.wire, req.filter, req.start, req.who)
	res, ok := s.ask(&connOpened{a: e, q: e.Queue()})
	pid, _ := res.(*actor.PID)
	if !ok || pid == nil {
		e.Cancel()
		s.leave()
		return
	}
	e.Serve(w, s.sys, pid)
}

// eventsRequest is what GET /events asks for.
type eventsRequest struct {
	wire   protocol.Filter
	filter record.Filter
	start  record.Cursor
	who    auth.Principal
}

// eventsRequest reads and checks a request of GET /events, or answers it
// with the error and returns false.
func (s *Server) eventsRequest(w http.ResponseWriter, r *http.Request) (eventsRequest, bool) {
	var req eventsRequest
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use GET")
		return req, false
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_query", "malformed query string: "+err.Error())
		return req, false
	}
	if err := checkParams(q, eventsParams, "from"); err != nil {
		writeError(w, http.StatusBadRequest, err.code, err.msg)
		return req, false
	}
	if req.wire, err = protocol.FilterFromQuery(q); err == nil {
		req.filter, err = req.wire.History()
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, protocol.CodeBadFilter, err.Error())
		return req, false
	}
	fromText, fromIn := q.Get("from"), "from"
	if id := strings.TrimSpace(r.Header.Get("Last-Event-ID")); id != "" {
		fromText, fromIn = id, "Last-Event-ID"
	}
	from, err := protocol.ParseFromIn(fromIn, fromText)
	if err != nil {
		writeError(w, http.StatusBadRequest, protocol.CodeBadCursor, err.Error())
		return req, false
	}
	if req.start, err = s.startCursor(req.filter, from); err != nil {
		var se *subscribeError
		if errors.As(err, &se) {
			writeError(w, http.StatusBadRequest, se.code, se.msg)
		} else {
			writeError(w, http.StatusInternalServerError, protocol.CodeInternal, "the subscription could not be set up")
		}
		return req, false
	}
	var ok bool
	if req.who, ok = s.authenticate(w, r); !ok {
		return req, false
	}
	if !req.who.Allows(auth.ScopeSubscribe) {
		writeError(w, http.StatusForbidden, protocol.CodeForbidden, "this token has no subscribe scope")
		return req, false
	}
	return req, true
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
