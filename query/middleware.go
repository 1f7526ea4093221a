package query

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/query/internal/api"
)

// statusWriter records the status code; it keeps Flush and Unwrap so that
// streaming handlers work through it. An answer whose handler wrote no
// position headers gets the projection's (position) when its header goes
// out: every answer says where it stands, and those that read the store
// say it of their read without paying for a default first.
type statusWriter struct {
	http.ResponseWriter
	code     int
	position func(http.ResponseWriter)
}

// started records the status code of the answer starting and sets the
// default position headers when none are set.
func (w *statusWriter) started(code int) {
	if w.code != 0 {
		return
	}
	w.code = code
	if w.Header().Get(HeaderSeq) == "" {
		w.position(w.ResponseWriter)
	}
}

// WriteHeader records the status code.
func (w *statusWriter) WriteHeader(code int) {
	w.started(code)
	w.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200.
func (w *statusWriter) Write(b []byte) (int, error) {
	w.started(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		w.started(http.StatusOK)
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// middleware applies the body limit, recovers from panics (a bug, never
// the client's fault: logged, answered 500) and records the latency.
func (s *Server) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, position: s.defaultPosition}
		defer func() {
			if rec := recover(); rec != nil {
				if rec == http.ErrAbortHandler {
					panic(rec)
				}
				s.log.Error("handler panic", zap.String("path", r.URL.Path), zap.Any("panic", rec), zap.Stack("stack"))
				if sw.code == 0 {
					writeError(sw, http.StatusInternalServerError, "internal", "internal error")
				}
			}
			route := r.Pattern
			if route == "" || route == "/" {
				route = "other"
			}
			code := sw.code
			if code == 0 {
				code = http.StatusOK
			}
			s.metrics.WithLabelValues(route, statusText(code)).Observe(time.Since(start).Seconds())
		}()
		if r.ContentLength > s.cfg.MaxBodyBytes {
			writeError(sw, http.StatusRequestEntityTooLarge, "body_too_large",
				fmt.Sprintf("request bodies are limited to %d bytes", s.cfg.MaxBodyBytes))
			return
		}
		r.Body = http.MaxBytesReader(sw, r.Body, s.cfg.MaxBodyBytes)
		next.ServeHTTP(sw, r)
	})
}

// defaultPosition writes the projection's position headers.
func (s *Server) defaultPosition(w http.ResponseWriter) {
	api.SetPosition(w, s.cfg.Projection.Applied(), s.cfg.Status().NodeTip)
}

func statusText(code int) string {
	var b [3]byte
	b[0], b[1], b[2] = byte('0'+code/100%10), byte('0'+code/10%10), byte('0'+code%10)
	return string(b[:])
}

// notFound answers paths without a route (404) and known paths asked with
// another method (405).
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		probe := r.Clone(r.Context())
		probe.Method = http.MethodGet
		if _, pattern := s.mux.Handler(probe); pattern != "/" && pattern != "" {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed here: the API is read-only")
			return
		}
	}
	writeError(w, http.StatusNotFound, "not_found", "no such resource: "+strings.TrimSpace(r.URL.Path))
}
