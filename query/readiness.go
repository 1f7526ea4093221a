package query

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// Reasons /readyz gives for not being ready: the keys of its notReady
// object and the reason label of the marlowe_not_ready metric.
const (
	NotReadyContractStore     = "contract_store_unavailable" // the contract store does not answer
	NotReadyNodeDisconnected  = "node_disconnected"          // not connected to the node
	NotReadyHandshake         = "node_handshake_failed"      // the node refuses the handshake (network magic, versions)
	NotReadyWaitingForNode    = "waiting_for_node"           // the node's tip is behind the follower's point
	NotReadyDiverged          = "diverged"                   // following stopped: the stored history is not on the node's chain
	NotReadyCommitFailing     = "commit_failing"             // the history store's last commit failed
	NotReadyBehindTip         = "behind_node_tip"            // the committed point is too far behind the node's tip
	NotReadyProjectionLagging = "projection_lagging"         // the projection is too far behind the history
	NotReadyProjectionFailing = "projection_failing"         // the projection's last commit failed
	NotReadyDatabaseFailing   = "database_failing"           // a reader's reads of the writer's database fail
	NotReadyReaderBehind      = "reader_behind"              // a reader has delivered too few of the writer's records
	NotReadyWriterStandby     = "writer_standby"             // a writer that does not hold the writer lease: a standby
	NotReadyLeaseLapsed       = "writer_lease_lapsed"        // a writer that holds the lease but has not renewed it in time: it commits nothing
	NotReadyNoWriter          = "no_writer"                  // a reader: the writer lease has expired, nobody writes
)

// NotReadyReasons lists every reason, in the order /readyz checks them.
var NotReadyReasons = []string{NotReadyWriterStandby, NotReadyLeaseLapsed, NotReadyContractStore, NotReadyDiverged, NotReadyWaitingForNode, NotReadyHandshake,
	NotReadyNodeDisconnected, NotReadyCommitFailing, NotReadyBehindTip, NotReadyProjectionFailing, NotReadyProjectionLagging,
	NotReadyDatabaseFailing, NotReadyReaderBehind, NotReadyNoWriter}

// NotReadyDetail details one reason of a Readiness.
type NotReadyDetail struct {
	Message string `json:"message"`
	// Value and Limit are the measure that is out of bounds and its bound
	// (blocks or records).
	Value *uint64 `json:"value,omitempty"`
	Limit *uint64 `json:"limit,omitempty"`
	// Since is when the condition started, where known.
	Since *time.Time `json:"since,omitempty"`
	// Action is what to run (diverged).
	Action string `json:"action,omitempty"`
}

// Readiness is the body of /readyz (200 when Ready, 503 otherwise): the
// services' tests decode it too.
type Readiness struct {
	Ready   bool     `json:"ready"`
	Reasons []string `json:"reasons"`
	// NotReady has one field per reason that holds (NotReadyReasons).
	NotReady map[string]NotReadyDetail `json:"notReady"`
}

type readyCheck struct {
	code string
	NotReadyDetail
}

func u64(v uint64) *uint64 { return &v }

func since(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// readiness evaluates every condition of /readyz: connected to the node
// (and following it), the last commit succeeded, the committed point
// within ReadyMaxBehind blocks of the node's tip, the projection within
// ReadyMaxSeqLag records of the history and committing, the contract store
// answering. It returns the conditions that fail, in NotReadyReasons order.
func (s *Server) readiness(ctx context.Context, st Status, at contractstore.Position) []readyCheck {
	var out []readyCheck
	add := func(code string, d NotReadyDetail) { out = append(out, readyCheck{code: code, NotReadyDetail: d}) }
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if l := st.WriterLease; l != nil && l.Writer {
		switch {
		case l.Lapsed:
			add(NotReadyLeaseLapsed, NotReadyDetail{Message: fmt.Sprintf("this writer has not renewed the writer lease for %s (TTL %s): "+
				"it commits nothing until it renews it", l.RenewalAge.Round(time.Millisecond), l.TTL)})
		case !l.Held:
			add(NotReadyWriterStandby, NotReadyDetail{Message: "this writer does not hold the writer lease (another process writes): " +
				"it stands by", Since: since(l.Since)})
		}
	}
	if err := s.cfg.Contracts.Ping(ctx); err != nil {
		add(NotReadyContractStore, NotReadyDetail{Message: "the contract store does not answer: " + err.Error()})
	}
	switch {
	case st.Reader != nil:
		// A reader follows the database, not the node: the writer's
		// progress below is as stored, and the reader's own position.
		r := st.Reader
		if r.ReadError != "" {
			add(NotReadyDatabaseFailing, NotReadyDetail{Message: "reads of the writer's database fail: " + r.ReadError})
		}
		if lag := r.WriterHead - r.Head; lag > s.cfg.ReadyMaxSeqLag {
			add(NotReadyReaderBehind, NotReadyDetail{
				Message: fmt.Sprintf("this reader has delivered up to seq %d, %d records behind the writer's head (at most %d)",
					r.Head, lag, s.cfg.ReadyMaxSeqLag),
				Value: u64(uint64(lag)), Limit: u64(uint64(s.cfg.ReadyMaxSeqLag))})
		}
		if l := st.WriterLease; l != nil && l.NoWriter() {
			msg, at := "no process has taken the writer lease yet: nobody writes the log this reader serves", since(l.Since)
			switch {
			case !l.Expired():
				msg, at = fmt.Sprintf("the writer lease's holder %s (epoch %d) is gone, its database session ended: nobody writes the log this reader serves",
					l.Holder, l.Epoch), nil
			case l.Holder != "":
				msg = fmt.Sprintf("the writer lease expired %s ago (its last holder %s, epoch %d): nobody writes the log this reader serves",
					(-l.ExpiresIn).Round(time.Millisecond), l.Holder, l.Epoch)
			}
			add(NotReadyNoWriter, NotReadyDetail{Message: msg, Since: at})
		}
	case st.Diverged != nil:
		add(NotReadyDiverged, NotReadyDetail{Message: "following stopped: " + st.Diverged.Reason, Action: st.Diverged.Action, Since: since(st.Diverged.Since)})
	case st.Waiting != nil:
		wt := st.Waiting
		add(NotReadyWaitingForNode, NotReadyDetail{
			Message: fmt.Sprintf("waiting for the node: its tip (block %d) is %d blocks behind the follower's point (block %d)",
				wt.NodeTip.BlockNo, wt.Blocks(), wt.Point.BlockNo),
			Value: u64(wt.NodeTip.BlockNo), Limit: u64(wt.Point.BlockNo), Since: since(wt.Since)})
	case !st.Connected && st.Handshake != nil:
		add(NotReadyHandshake, NotReadyDetail{Message: "the node refuses the handshake (" + st.Handshake.Reason + "): " + st.Handshake.Message})
	case !st.Connected:
		msg := "not connected to the node"
		if st.NodeError != "" {
			msg += ": " + st.NodeError
		}
		add(NotReadyNodeDisconnected, NotReadyDetail{Message: msg})
	}
	if st.CommitError != "" {
		add(NotReadyCommitFailing, NotReadyDetail{Message: "the history store's last commit failed: " + st.CommitError,
			Value: u64(st.CommitFailures), Since: since(st.CommitFailingSince)})
	}
	if b := behind(st.NodeTip, st.Committed); b > s.cfg.ReadyMaxBehind && st.Diverged == nil && st.Waiting == nil {
		add(NotReadyBehindTip, NotReadyDetail{
			Message: fmt.Sprintf("the committed point is %d blocks behind the node's tip (at most %d)", b, s.cfg.ReadyMaxBehind),
			Value:   u64(b), Limit: u64(s.cfg.ReadyMaxBehind)})
	}
	if st.ProjectionError != "" {
		add(NotReadyProjectionFailing, NotReadyDetail{Message: "the contract projection's last commit failed: " + st.ProjectionError})
	}
	if lag := st.HistorySeq - at.Seq; lag > s.cfg.ReadyMaxSeqLag {
		add(NotReadyProjectionLagging, NotReadyDetail{
			Message: fmt.Sprintf("the projection is %d records behind the history (at most %d)", lag, s.cfg.ReadyMaxSeqLag),
			Value:   u64(uint64(lag)), Limit: u64(uint64(s.cfg.ReadyMaxSeqLag))})
	}
	return out
}

// readyz answers 200 when every readiness condition holds, else 503 with
// each failing one: its text in reasons and its details in notReady.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	st, at, ok := s.ownAnswer(w, r)
	if !ok {
		return
	}
	out := Readiness{Ready: true, Reasons: []string{}, NotReady: map[string]NotReadyDetail{}}
	for _, c := range s.readiness(r.Context(), st, at) {
		out.Ready = false
		out.Reasons = append(out.Reasons, c.Message)
		out.NotReady[c.code] = c.NotReadyDetail
	}
	if !out.Ready {
		w.Header().Set(HeaderRetryAfter, "5")
		api.WriteJSON(w, http.StatusServiceUnavailable, out)
		return
	}
	api.WriteJSON(w, http.StatusOK, out)
}

// readinessCollector exposes readiness as metrics when scraped: marlowe_ready
// (1 when ready) and marlowe_not_ready{reason} (1 while that reason holds).
type readinessCollector struct{ s *Server }

var (
	readyDesc    = prometheus.NewDesc("marlowe_ready", "1 while /readyz answers 200.", nil, nil)
	notReadyDesc = prometheus.NewDesc("marlowe_not_ready",
		"1 while this reason keeps /readyz from answering 200 (the keys of its notReady object).", []string{"reason"}, nil)
)

func (c readinessCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- readyDesc
	ch <- notReadyDesc
}

func (c readinessCollector) Collect(ch chan<- prometheus.Metric) {
	failing := map[string]bool{}
	for _, f := range c.s.readiness(context.Background(), c.s.cfg.Status(), c.s.cfg.Projection.Applied()) {
		failing[f.code] = true
	}
	ready := 0.0
	if len(failing) == 0 {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, ready)
	for _, code := range NotReadyReasons {
		v := 0.0
		if failing[code] {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(notReadyDesc, prometheus.GaugeValue, v, code)
	}
}
