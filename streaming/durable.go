package streaming

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/query/origin"
	"github.com/marlowe-follower/follower/streaming/auth"
	"github.com/marlowe-follower/follower/streaming/protocol"
	"github.com/marlowe-follower/follower/streaming/stream"
	"github.com/marlowe-follower/follower/streaming/streamstore"
	"github.com/marlowe-follower/follower/streaming/wire"
)

// ErrNoDurableStreams is returned by the stream functions of a server
// without a stream store.
var ErrNoDurableStreams = errors.New("streaming: durable streams are not enabled (no stream store)")

// openDurable returns the durable stream a subscribe command names,
// creating it (from the command's filter and starting point) when it does
// not exist. An existing stream keeps its filter, mode and batching: a
// command that gives another filter or mode is refused; its from is
// ignored (the stream resumes after its last ack). A stream belongs to the
// principal that created it: another one is refused (forbidden). The
// server actor runs it: creations and deletions are serialized.
func (a *serverActor) openDurable(c actor.Context, m *wire.OpenStream) (*streamRef, error) {
	s, cmd, who := a.s, m.Cmd, m.Who
	if s.store == nil {
		return nil, &subscribeError{protocol.CodeDurableUnavailable, "this server keeps no durable streams"}
	}
	if !who.Allows(auth.ScopeStreams) {
		return nil, &subscribeError{protocol.CodeForbidden, "this token has no streams scope: it may not use durable streams"}
	}
	if !protocol.ValidDurableName(cmd.Stream) {
		return nil, &subscribeError{protocol.CodeBadRequest,
			"a durable stream name is 1 to 100 of the characters A-Z a-z 0-9 . _ -"}
	}
	ref := a.durables[cmd.Stream]
	if ref == nil {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		rec, err := s.store.StreamGet(ctx, cmd.Stream)
		if errors.Is(err, streamstore.ErrNotFound) {
			rec, err = s.createDurable(ctx, cmd, m.Filter, who)
		}
		if err != nil {
			return nil, err
		}
		spec, err := streamFromStored(rec)
		if err != nil {
			return nil, err
		}
		ref = a.spawnStream(c, spec)
	}
	if !who.Owns(ref.owner) {
		return nil, &subscribeError{protocol.CodeForbidden,
			fmt.Sprintf("durable stream %q belongs to another credential", ref.name)}
	}
	if cmd.Filter != nil && !ref.wire.Equal(cmd.Filter) {
		stored, _ := json.Marshal(ref.wire)
		return nil, &subscribeError{protocol.CodeStreamMismatch,
			fmt.Sprintf("durable stream %q exists with the filter %s; delete it to change it", ref.name, stored)}
	}
	if cmd.Mode != "" && cmd.Mode != ref.mode {
		return nil, &subscribeError{protocol.CodeStreamMismatch,
			fmt.Sprintf("durable stream %q exists in %s mode", ref.name, ref.mode)}
	}
	return ref, nil
}

func (s *Server) createDurable(ctx context.Context, cmd *protocol.Command, filter record.Filter, who auth.Principal) (*streamstore.Stream, error) {
	if cmd.Filter == nil {
		return nil, &subscribeError{protocol.CodeBadFilter,
			fmt.Sprintf("durable stream %q does not exist: give a filter to create it", cmd.Stream)}
	}
	from, err := protocol.ParseFrom(cmd.From)
	if err != nil {
		return nil, &subscribeError{protocol.CodeBadCursor, err.Error()}
	}
	start, err := s.startCursor(filter, from)
	if err != nil {
		return nil, err
	}
	spec := s.newStream(cmd, filter)
	rec := &streamstore.Stream{Name: cmd.Stream, Owner: who.Name, Filter: spec.Wire, Mode: spec.Mode, BatchSize: spec.BatchSize,
		BatchTimeout: spec.BatchTimeout, Cursor: start.String()}
	if err := s.store.StreamCreate(ctx, rec); err != nil {
		if errors.Is(err, streamstore.ErrExists) { // created by another process meanwhile
			return s.store.StreamGet(ctx, cmd.Stream)
		}
		return nil, err
	}
	s.log.Info("durable stream created", zap.String("stream", rec.Name), zap.String("owner", rec.Owner), zap.String("cursor", rec.Cursor),
		zap.String("mode", string(rec.Mode)))
	return rec, nil
}

// StreamInfo describes a durable stream.
type StreamInfo struct {
	Name         string            `json:"name"`
	Filter       protocol.Filter   `json:"filter"`
	Mode         protocol.Mode     `json:"mode"`
	BatchSize    int               `json:"batchSize"`
	BatchTimeout protocol.Duration `json:"batchTimeout"`
	// Cursor is the acknowledged position: the stream resumes after it.
	Cursor string `json:"cursor"`
	// Batch is the number of the last batch acknowledged.
	Batch int64 `json:"batch"`
	// Records counts the records acknowledged.
	Records int64 `json:"records"`
	// Lag is the head seq minus the cursor's seq.
	Lag int64 `json:"lag"`
	// Connections is the number of connections attached now.
	Connections int `json:"connections"`
	// InFlight is the number of the batch waiting for its ack (0: none).
	InFlight  int64     `json:"inFlight"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// owner is the stream's credential name (not shown).
	owner string
}

func (s *Server) info(rec *streamstore.Stream, head int64) StreamInfo {
	in := StreamInfo{Name: rec.Name, Filter: rec.Filter, Mode: rec.Mode, BatchSize: rec.BatchSize,
		BatchTimeout: protocol.Duration(rec.BatchTimeout), Cursor: rec.Cursor, Batch: rec.Batch, Records: rec.Records,
		CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt, owner: rec.Owner}
	if c, err := record.ParseCursor(rec.Cursor); err == nil {
		in.Lag = max(head-c.Seq, 0)
	}
	if ref := s.view.Load().durable[rec.Name]; ref != nil {
		if st := ref.stats.Load(); st != nil {
			in.Connections, in.InFlight = st.Connections, st.InFlight
		}
	}
	return in
}

// ListStreams returns the durable streams who may use (auth.Principal.Owns:
// its own, or all for an admin) in name order: at most limit (0:
// streamstore.MaxList) with names after after.
func (s *Server) ListStreams(ctx context.Context, who auth.Principal, after string, limit int) ([]StreamInfo, error) {
	if s.store == nil {
		return nil, ErrNoDurableStreams
	}
	p := &streamstore.StreamListParams{After: after, Limit: limit}
	if !who.Admin() {
		p.Owner = &who.Name
	}
	recs, err := s.store.StreamList(ctx, p)
	if err != nil {
		return nil, err
	}
	head := s.head()
	out := make([]StreamInfo, 0, len(recs))
	for i := range recs {
		out = append(out, s.info(&recs[i], head))
	}
	return out, nil
}

// GetStream describes one durable stream; the error wraps
// streamstore.ErrNotFound when there is none.
func (s *Server) GetStream(ctx context.Context, name string) (*StreamInfo, error) {
	if s.store == nil {
		return nil, ErrNoDurableStreams
	}
	rec, err := s.store.StreamGet(ctx, name)
	if err != nil {
		return nil, err
	}
	in := s.info(rec, s.head())
	return &in, nil
}

// DeleteStream deletes a durable stream: its connections get an error
// frame (stream_deleted) and lose the subscription, its round trip in
// flight ends, and its stored cursor is removed. The error wraps
// streamstore.ErrNotFound when there is no such stream.
func (s *Server) DeleteStream(ctx context.Context, name string) error {
	if s.store == nil {
		return ErrNoDurableStreams
	}
	res, ok := s.ask(&deleteRequest{name: name})
	if !ok {
		return errors.New("streaming: the server is not running")
	}
	if err, _ := res.(error); err != nil {
		return err
	}
	return nil
}

// StreamsHandler serves the durable streams over HTTP, for the query API
// to mount at /streams and /streams/:
//
//	GET    /streams[?after=NAME&limit=N]  {"streams": [StreamInfo...], "tip": Tip}
//	GET    /streams/{name}                StreamInfo, or 404
//	DELETE /streams/{name}                204, or 404
//
// With tokens configured, requests need one as for the WebSocket, with the
// streams scope; a caller sees and deletes only its own streams (an admin
// token all): another owner's stream is 404, as if it did not exist.
//
// A DELETE that carries an Origin (a browser's) must come from an allowed
// origin (streamsOriginAllowed): a DNS-rebinding page, whose Origin and
// Host are both the attacker's name, cannot delete the streams of an open
// service on loopback.
func (s *Server) StreamsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /streams", s.handleList)
	mux.HandleFunc("GET /streams/{name}", s.handleGet)
	mux.HandleFunc("DELETE /streams/{name}", s.handleDelete)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !s.streamsOriginAllowed(w, r) {
			return
		}
		who, ok := s.authenticate(w, r)
		if !ok {
			return
		}
		if !who.Allows(auth.ScopeStreams) {
			writeError(w, http.StatusForbidden, protocol.CodeForbidden, "this token has no streams scope")
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), principalKey{}, who))
		if s.store == nil {
			writeError(w, http.StatusNotImplemented, "durable_unavailable", ErrNoDurableStreams.Error())
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// streamsOriginAllowed checks the Origin of a request that changes a
// stream against the allowed origins (streaming.origins, by default
// cors.origins) and the origins of the address the request arrived on (a
// page the same port served), or answers 403. Like the WebSocket's check it
// never compares with the Host header, which a DNS-rebinding page
// controls. A request without Origin (a program, not a browser) passes:
// browsers send it with every DELETE.
func (s *Server) streamsOriginAllowed(w http.ResponseWriter, r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || s.origins.Load().Allows(o) {
		return true
	}
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if own := (origin.List{}).With(origin.OfListener(local.String())...); own.Allows(o) {
			return true
		}
	}
	s.log.Debug("durable stream request from a refused origin", zap.String("remote", r.RemoteAddr), zap.String("origin", o),
		zap.String("method", r.Method))
	writeError(w, http.StatusForbidden, "origin_not_allowed", fmt.Sprintf("origin %q may not change durable streams here: "+
		"the streaming.origins setting (MARLOWE_RT_STREAMING_ORIGINS; by default cors.origins) lists the allowed browser origins", o))
	return false
}

// streamsParams are the query parameters of GET /streams; the other
// routes take only access_token.
var (
	streamsParams     = []string{"after", "limit", "access_token"}
	streamsNameParams = []string{"access_token"}
)

// namedParams checks the query string of /streams/{name}: access_token only.
func namedParams(w http.ResponseWriter, r *http.Request) bool {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_query", "malformed query string: "+err.Error())
		return false
	}
	if perr := checkParams(q, streamsNameParams); perr != nil {
		writeError(w, http.StatusBadRequest, perr.code, perr.msg)
		return false
	}
	return true
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_query", "malformed query string: "+err.Error())
		return
	}
	if perr := checkParams(q, streamsParams, "after", "limit"); perr != nil {
		writeError(w, http.StatusBadRequest, perr.code, perr.msg)
		return
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > streamstore.MaxList {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("limit must be 1..%d", streamstore.MaxList))
			return
		}
		limit = n
	}
	list, err := s.ListStreams(r.Context(), callerOf(r), q.Get("after"), limit)
	if err != nil {
		storeFailed(w, r, s.log, "listing the streams", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"streams": list, "tip": s.tip()})
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	if !namedParams(w, r) {
		return
	}
	in, err := s.GetStream(r.Context(), r.PathValue("name"))
	if err == nil && !callerOf(r).Owns(in.owner) {
		err = streamstore.ErrNotFound // another owner's stream does not exist for this caller
	}
	s.answerStream(w, r, err, "reading the stream", func() { writeJSON(w, http.StatusOK, in) })
}

// answerStream answers a store call on the durable stream the path names
// (doing says what the call did): 404 when there is no such stream, the
// store's failure, else what ok writes.
func (s *Server) answerStream(w http.ResponseWriter, r *http.Request, err error, doing string, ok func()) {
	switch {
	case errors.Is(err, streamstore.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no durable stream %q", r.PathValue("name")))
	case err != nil:
		storeFailed(w, r, s.log, doing, err)
	default:
		ok()
	}
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	if !namedParams(w, r) {
		return
	}
	err := s.deleteOwnStream(r.Context(), callerOf(r), r.PathValue("name"))
	s.answerStream(w, r, err, "deleting the stream", func() { w.WriteHeader(http.StatusNoContent) })
}

// principalKey carries the caller of a /streams request in its context.
type principalKey struct{}

// callerOf returns the principal StreamsHandler authenticated.
func callerOf(r *http.Request) auth.Principal {
	p, _ := r.Context().Value(principalKey{}).(auth.Principal)
	return p
}

// deleteOwnStream deletes a stream who owns; another owner's is not found.
func (s *Server) deleteOwnStream(ctx context.Context, who auth.Principal, name string) error {
	if s.store == nil {
		return ErrNoDurableStreams
	}
	rec, err := s.store.StreamGet(ctx, name)
	if err != nil {
		return err
	}
	if !who.Owns(rec.Owner) {
		return fmt.Errorf("durable stream %q: %w", name, streamstore.ErrNotFound)
	}
	return s.DeleteStream(ctx, name)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// storeFailed answers a stream store that could not answer (a database
// away, a connection cut) as the query API answers its store's: 503
// store_unavailable with Retry-After, logged; the client retries.
func storeFailed(w http.ResponseWriter, r *http.Request, log *zap.Logger, what string, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		writeError(w, 499, "canceled", "the request was canceled") // nobody reads it
		return
	}
	log.Error(what+" failed", zap.String("path", r.URL.Path), zap.Error(err))
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, protocol.CodeStoreUnavailable, what+" failed: the stream store could not answer; retry later")
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]string{"code": code, "message": msg})
}

// subscribeError is a refusal the client is told about.
type subscribeError struct{ code, msg string }

// Error implements error.
func (e *subscribeError) Error() string { return e.code + ": " + e.msg }

// startCursor resolves a starting point to a cursor: origin is a snapshot
// as of the head now, tip the head now.
func (s *Server) startCursor(filter record.Filter, from record.From) (record.Cursor, error) {
	// A reader process may not have reached a cursor another reader gave
	// (the subscription waits for it): valid up to the writer's head.
	head := s.h.CommittedHead()
	if from.Kind == record.FromCursor && max(from.Cursor.Seq, from.Cursor.Snapshot) > head {
		return record.Cursor{}, &subscribeError{protocol.CodeBadCursor,
			fmt.Sprintf("cursor %s is beyond the head of the log (%d)", from.Cursor, head)}
	}
	return s.h.Subscribe(filter, from).Cursor(), nil
}

// newStream is the stream of a subscribe command.
func (s *Server) newStream(cmd *protocol.Command, filter record.Filter) stream.Spec {
	spec := stream.Spec{Name: cmd.Stream, Durable: cmd.Durable, Mode: cmd.Mode, Filter: filter,
		Wire: cmd.Filter.Canonical(), BatchSize: cmd.BatchSize, BatchTimeout: time.Duration(cmd.BatchTimeout)}
	if spec.Mode == "" {
		spec.Mode = protocol.ModeAck
	}
	if spec.BatchSize == 0 {
		spec.BatchSize = s.cfg.DefaultBatchSize
	}
	if cmd.BatchTimeout == 0 {
		spec.BatchTimeout = s.cfg.DefaultBatchTimeout
	}
	return spec
}

// streamFromStored is the stream of a stored durable stream.
func streamFromStored(rec *streamstore.Stream) (stream.Spec, error) {
	filter, err := rec.Filter.History()
	if err != nil {
		return stream.Spec{}, fmt.Errorf("durable stream %s: stored filter: %w", rec.Name, err)
	}
	cur, err := record.ParseCursor(rec.Cursor)
	if err != nil {
		return stream.Spec{}, fmt.Errorf("durable stream %s: stored cursor: %w", rec.Name, err)
	}
	return stream.Spec{Name: rec.Name, Owner: rec.Owner, Durable: true, Mode: rec.Mode, Filter: filter, Wire: rec.Filter.Canonical(),
		BatchSize: rec.BatchSize, BatchTimeout: rec.BatchTimeout, Acked: cur, Batch: rec.Batch, Records: rec.Records}, nil
}

// streamDeps is what the server's stream actors share.
func (s *Server) streamDeps() stream.Deps {
	m := s.m
	return stream.Deps{
		Config: stream.Config{AckTimeout: s.cfg.AckTimeout, RetryDelay: s.cfg.RetryDelay, LeaseHolder: s.cfg.LeaseHolder,
			LeaseTTL: s.cfg.LeaseTTL, LeaseRetry: s.cfg.LeaseRetry},
		Metrics: &stream.Metrics{BatchesSent: m.batchesSent, RecordsSent: m.recordsSent, Acks: m.acks, Nacks: m.nacks,
			Redeliveries: m.redeliveries, StaleAcks: m.staleAcks, AckTimeouts: m.ackTimeouts, StoreFailures: m.storeFailures,
			LeaseWaits: m.leaseWaits, LeasesLost: m.leasesLost},
		Store: s.store, History: s.h, CatchUp: s.cu, Tips: s.tips, Records: &s.enc, Log: s.log,
		Workers: &s.workers, Reads: s.reads,
	}
}
