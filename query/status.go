package query

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/record"
)

// openAPIDocument is the API's OpenAPI 3 description, served at
// /openapi.json; TestOpenAPI checks every route and answer against it.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns the OpenAPI document.
func OpenAPI() []byte { return append([]byte(nil), openAPIDocument...) }

func isHistoryNotFound(err error) bool { return errors.Is(err, record.ErrNotFound) }

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
	Committed    chain.BlockHeader `json:"committedPoint"`
	SyncProgress float64           `json:"syncProgress"`
	BlocksBehind uint64            `json:"blocksBehind"`
	// CommittedBehind is the committed point's distance to the node's tip.
	CommittedBehind uint64         `json:"committedBlocksBehind"`
	HistorySeq      int64          `json:"historySeq"`
	Projection      projectionJSON `json:"projection"`
	// SlotClock is the network's slot clock, for clients that show a
	// block's time on any network (the explorer's pages do).
	SlotClock *slotClockJSON `json:"slotClock,omitempty"`

	Role       string          `json:"role,omitempty"`
	Reader     *readerJSON     `json:"reader,omitempty"`
	WriterLock *WriterLockJSON `json:"writerLock,omitempty"`

	NodeError   string           `json:"nodeError,omitempty"`
	Handshake   *handshakeJSON   `json:"handshakeFailure,omitempty"`
	Waiting     *waitingJSON     `json:"waitingForNode,omitempty"`
	Diverged    *divergedJSON    `json:"diverged,omitempty"`
	CommitError *commitErrorJSON `json:"commitError,omitempty"`
}

// WriterLockJSON is /status's writerLock (the standby's answer uses it too).
type WriterLockJSON struct {
	Held       bool      `json:"held"`
	Epoch      int64     `json:"epoch,omitempty"`
	SessionPID uint32    `json:"sessionPid,omitempty"`
	Since      time.Time `json:"since"`
}

type readerJSON struct {
	Head       int64  `json:"head"`
	WriterHead int64  `json:"writerHead"`
	Lag        int64  `json:"lag"`
	Listening  bool   `json:"listening"`
	Notices    uint64 `json:"notices"`
	Polls      uint64 `json:"polls"`
	ReadError  string `json:"readError,omitempty"`
	// WriterPresent and WriterSince: whether a session holds the writer
	// lock and since when that has been so (absent until known).
	WriterPresent *bool        `json:"writerPresent,omitempty"`
	WriterSince   *time.Time   `json:"writerSince,omitempty"`
	Replica       *replicaJSON `json:"replica,omitempty"`
}

type replicaJSON struct {
	Head     int64  `json:"head"`
	LagSeqs  int64  `json:"lagSeqs"`
	LagBytes *int64 `json:"lagBytes"`
}

func readerOf(r *ReaderStatus) *readerJSON {
	if r == nil {
		return nil
	}
	out := &readerJSON{Head: r.Head, WriterHead: r.WriterHead, Lag: max(0, r.WriterHead-r.Head), Listening: r.Listening,
		Notices: r.Notices, Polls: r.Polls, ReadError: r.ReadError}
	if w := r.Writer; w != nil {
		present := w.Present
		out.WriterPresent, out.WriterSince = &present, since(w.Since)
	}
	if rp := r.Replica; rp != nil {
		out.Replica = &replicaJSON{Head: rp.Head, LagSeqs: max(0, rp.LagSeqs)}
		if rp.LagBytes >= 0 {
			b := rp.LagBytes
			out.Replica.LagBytes = &b
		}
	}
	return out
}

type slotClockJSON struct {
	ZeroSlot         uint64 `json:"zeroSlot"`
	ZeroTimeMillis   int64  `json:"zeroTimeMillis"`
	SlotLengthMillis int64  `json:"slotLengthMillis"`
}

type handshakeJSON struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type waitingJSON struct {
	NodeTip      tipJSON           `json:"nodeTip"`
	Follower     chain.BlockHeader `json:"followerPoint"`
	BlocksBehind uint64            `json:"blocksBehind"`
	Since        time.Time         `json:"since"`
}

type divergedJSON struct {
	Reason string    `json:"reason"`
	Action string    `json:"action"`
	Since  time.Time `json:"since"`
}

type commitErrorJSON struct {
	Message  string    `json:"message"`
	Since    time.Time `json:"since"`
	Failures uint64    `json:"failures"`
}

// behind is how many blocks h is behind the tip (0 when at or past it).
func behind(tip chain.Tip, h chain.BlockHeader) uint64 {
	if tip.BlockNo <= h.BlockNo {
		return 0
	}
	return tip.BlockNo - h.BlockNo
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.fail(w, r, err, "")
		return
	}
	st := s.cfg.Status()
	at := s.cfg.Projection.Applied()
	setPosition(w, at, st.NodeTip)
	out := statusJSON{
		Network: st.Network, NetworkMagic: st.NetworkMagic, Version: st.Version, Connected: st.Connected,
		NodeTip: tipOf(st.NodeTip), Follower: st.Follower, Committed: st.Committed, SyncProgress: st.SyncProgress,
		BlocksBehind: st.BlocksBehind, CommittedBehind: behind(st.NodeTip, st.Committed),
		HistorySeq: st.HistorySeq,
		Projection: projectionJSON{Seq: at.Seq, Block: at.Block, Lag: max(0, st.HistorySeq-at.Seq), Error: st.ProjectionError},
		Role:       st.Role, Reader: readerOf(st.Reader),
	}
	if c := s.cfg.Slots; c != nil {
		out.SlotClock = &slotClockJSON{ZeroSlot: c.ZeroSlot, ZeroTimeMillis: c.ZeroTimeMillis, SlotLengthMillis: c.SlotLengthMillis}
	}
	if !st.Connected {
		out.NodeError = st.NodeError
	}
	if h := st.Handshake; h != nil {
		out.Handshake = &handshakeJSON{Reason: h.Reason, Message: h.Message}
	}
	if wt := st.Waiting; wt != nil {
		out.Waiting = &waitingJSON{NodeTip: tipOf(wt.NodeTip), Follower: wt.Point, BlocksBehind: wt.Blocks(), Since: wt.Since.UTC()}
	}
	if d := st.Diverged; d != nil {
		out.Diverged = &divergedJSON{Reason: d.Reason, Action: d.Action, Since: d.Since.UTC()}
	}
	if st.CommitError != "" {
		out.CommitError = &commitErrorJSON{Message: st.CommitError, Since: st.CommitFailingSince.UTC(), Failures: st.CommitFailures}
	}
	if l := st.WriterLock; l != nil {
		out.WriterLock = &WriterLockJSON{Held: l.Held, Epoch: l.Epoch, SessionPID: l.SessionPID, Since: l.Since.UTC()}
	}
	writeJSON(w, http.StatusOK, out)
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
	NotReadyWriterStandby     = "writer_standby"             // a writer that does not hold the writer lock: a standby, or one that lost it
	NotReadyNoWriter          = "no_writer"                  // a reader: no process has held the writer lock for longer than NoWriterGrace
)

// NotReadyReasons lists every reason, in the order /readyz checks them.
var NotReadyReasons = []string{NotReadyWriterStandby, NotReadyContractStore, NotReadyDiverged, NotReadyWaitingForNode, NotReadyHandshake,
	NotReadyNodeDisconnected, NotReadyCommitFailing, NotReadyBehindTip, NotReadyProjectionFailing, NotReadyProjectionLagging,
	NotReadyDatabaseFailing, NotReadyReaderBehind, NotReadyNoWriter}

// notReadyJSON details one reason.
type notReadyJSON struct {
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

type readyJSON struct {
	Ready   bool     `json:"ready"`
	Reasons []string `json:"reasons"`
	// NotReady has one field per reason that holds (NotReadyReasons).
	NotReady map[string]notReadyJSON `json:"notReady"`
}

type readyCheck struct {
	code string
	notReadyJSON
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
	add := func(code string, d notReadyJSON) { out = append(out, readyCheck{code: code, notReadyJSON: d}) }
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if l := st.WriterLock; l != nil && !l.Held {
		add(NotReadyWriterStandby, notReadyJSON{Message: "this writer does not hold the writer lock (another process writes): " +
			"it stands by", Since: since(l.Since)})
	}
	if err := s.cfg.Contracts.Ping(ctx); err != nil {
		add(NotReadyContractStore, notReadyJSON{Message: "the contract store does not answer: " + err.Error()})
	}
	switch {
	case st.Reader != nil:
		// A reader follows the database, not the node: the writer's
		// progress below is as stored, and the reader's own position.
		r := st.Reader
		if r.ReadError != "" {
			add(NotReadyDatabaseFailing, notReadyJSON{Message: "reads of the writer's database fail: " + r.ReadError})
		}
		if lag := r.WriterHead - r.Head; lag > s.cfg.ReadyMaxSeqLag {
			add(NotReadyReaderBehind, notReadyJSON{
				Message: fmt.Sprintf("this reader has delivered up to seq %d, %d records behind the writer's head (at most %d)",
					r.Head, lag, s.cfg.ReadyMaxSeqLag),
				Value: u64(uint64(lag)), Limit: u64(uint64(s.cfg.ReadyMaxSeqLag))})
		}
		if w := r.Writer; w != nil && !w.Present {
			if gone := time.Since(w.Since); gone > s.cfg.NoWriterGrace {
				add(NotReadyNoWriter, notReadyJSON{
					Message: fmt.Sprintf("no process has held the writer lock for %s (longer than %s): nobody writes the log this reader serves",
						gone.Round(time.Second), s.cfg.NoWriterGrace),
					Since: since(w.Since)})
			}
		}
	case st.Diverged != nil:
		add(NotReadyDiverged, notReadyJSON{Message: "following stopped: " + st.Diverged.Reason, Action: st.Diverged.Action, Since: since(st.Diverged.Since)})
	case st.Waiting != nil:
		wt := st.Waiting
		add(NotReadyWaitingForNode, notReadyJSON{
			Message: fmt.Sprintf("waiting for the node: its tip (block %d) is %d blocks behind the follower's point (block %d)",
				wt.NodeTip.BlockNo, wt.Blocks(), wt.Point.BlockNo),
			Value: u64(wt.NodeTip.BlockNo), Limit: u64(wt.Point.BlockNo), Since: since(wt.Since)})
	case !st.Connected && st.Handshake != nil:
		add(NotReadyHandshake, notReadyJSON{Message: "the node refuses the handshake (" + st.Handshake.Reason + "): " + st.Handshake.Message})
	case !st.Connected:
		msg := "not connected to the node"
		if st.NodeError != "" {
			msg += ": " + st.NodeError
		}
		add(NotReadyNodeDisconnected, notReadyJSON{Message: msg})
	}
	if st.CommitError != "" {
		add(NotReadyCommitFailing, notReadyJSON{Message: "the history store's last commit failed: " + st.CommitError,
			Value: u64(st.CommitFailures), Since: since(st.CommitFailingSince)})
	}
	if b := behind(st.NodeTip, st.Committed); b > s.cfg.ReadyMaxBehind && st.Diverged == nil && st.Waiting == nil {
		add(NotReadyBehindTip, notReadyJSON{
			Message: fmt.Sprintf("the committed point is %d blocks behind the node's tip (at most %d)", b, s.cfg.ReadyMaxBehind),
			Value:   u64(b), Limit: u64(s.cfg.ReadyMaxBehind)})
	}
	if st.ProjectionError != "" {
		add(NotReadyProjectionFailing, notReadyJSON{Message: "the contract projection's last commit failed: " + st.ProjectionError})
	}
	if lag := st.HistorySeq - at.Seq; lag > s.cfg.ReadyMaxSeqLag {
		add(NotReadyProjectionLagging, notReadyJSON{
			Message: fmt.Sprintf("the projection is %d records behind the history (at most %d)", lag, s.cfg.ReadyMaxSeqLag),
			Value:   u64(uint64(lag)), Limit: u64(uint64(s.cfg.ReadyMaxSeqLag))})
	}
	return out
}

// readyz answers 200 when every readiness condition holds, else 503 with
// each failing one: its text in reasons and its details in notReady.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.fail(w, r, err, "")
		return
	}
	st := s.cfg.Status()
	at := s.cfg.Projection.Applied()
	setPosition(w, at, st.NodeTip)
	out := readyJSON{Ready: true, Reasons: []string{}, NotReady: map[string]notReadyJSON{}}
	for _, c := range s.readiness(r.Context(), st, at) {
		out.Ready = false
		out.Reasons = append(out.Reasons, c.Message)
		out.NotReady[c.code] = c.notReadyJSON
	}
	if !out.Ready {
		w.Header().Set(HeaderRetryAfter, "5")
		writeJSON(w, http.StatusServiceUnavailable, out)
		return
	}
	writeJSON(w, http.StatusOK, out)
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
