package query

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history"
)

// openAPIDocument is the API's OpenAPI 3 description, served at
// /openapi.json; TestOpenAPI checks every route and answer against it.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns the OpenAPI document.
func OpenAPI() []byte { return append([]byte(nil), openAPIDocument...) }

func isHistoryNotFound(err error) bool { return errors.Is(err, history.ErrNotFound) }

type projectionJSON struct {
	Seq   int64             `json:"seq"`
	Block chain.BlockHeader `json:"block"`
	// Lag is how many history records the projection has still to apply.
	Lag   int64  `json:"lag"`
	Error string `json:"error,omitempty"`
}

type statusJSON struct {
	Network      string            `json:"network"`
	NetworkMagic uint32            `json:"networkMagic"`
	Version      string            `json:"version"`
	Connected    bool              `json:"connected"`
	NodeTip      tipJSON           `json:"nodeTip"`
	Follower     chain.BlockHeader `json:"followerPoint"`
	SyncProgress float64           `json:"syncProgress"`
	BlocksBehind uint64            `json:"blocksBehind"`
	HistorySeq   int64             `json:"historySeq"`
	Projection   projectionJSON    `json:"projection"`
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.fail(w, r, err, "")
		return
	}
	st := s.cfg.Status()
	at := s.cfg.Projection.Applied()
	setPosition(w, at, st.NodeTip)
	writeJSON(w, http.StatusOK, statusJSON{
		Network: st.Network, NetworkMagic: st.NetworkMagic, Version: st.Version, Connected: st.Connected,
		NodeTip: tipOf(st.NodeTip), Follower: st.Follower, SyncProgress: st.SyncProgress, BlocksBehind: st.BlocksBehind,
		HistorySeq: st.HistorySeq,
		Projection: projectionJSON{Seq: at.Seq, Block: at.Block, Lag: max(0, st.HistorySeq-at.Seq), Error: st.ProjectionError},
	})
}

type healthJSON struct {
	Status string `json:"status"`
}

// healthz answers while the process serves.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.fail(w, r, err, "")
		return
	}
	setPosition(w, s.cfg.Projection.Applied(), s.cfg.Status().NodeTip)
	writeJSON(w, http.StatusOK, healthJSON{Status: "ok"})
}

type readyJSON struct {
	Ready   bool     `json:"ready"`
	Reasons []string `json:"reasons"`
}

// readyz answers 200 when the contract store answers, the projection is
// close to the history head and the follower close to the node's tip.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.fail(w, r, err, "")
		return
	}
	st := s.cfg.Status()
	at := s.cfg.Projection.Applied()
	setPosition(w, at, st.NodeTip)
	reasons := []string{}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.cfg.Contracts.Ping(ctx); err != nil {
		reasons = append(reasons, "the contract store does not answer")
	}
	if lag := st.HistorySeq - at.Seq; lag > s.cfg.ReadyMaxSeqLag {
		reasons = append(reasons, fmt.Sprintf("the projection is %d records behind the history (at most %d)", lag, s.cfg.ReadyMaxSeqLag))
	}
	if st.BlocksBehind > s.cfg.ReadyMaxBehind {
		reasons = append(reasons, fmt.Sprintf("the follower is %d blocks behind the node's tip (at most %d)", st.BlocksBehind, s.cfg.ReadyMaxBehind))
	}
	if len(reasons) > 0 {
		w.Header().Set(HeaderRetryAfter, "5")
		writeJSON(w, http.StatusServiceUnavailable, readyJSON{Reasons: reasons})
		return
	}
	writeJSON(w, http.StatusOK, readyJSON{Ready: true, Reasons: reasons})
}

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.fail(w, r, err, "")
		return
	}
	setPosition(w, s.cfg.Projection.Applied(), s.cfg.Status().NodeTip)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "public, max-age=300")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument)
}
