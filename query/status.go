package query

import (
	_ "embed"
	"net/http"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// openAPIDocument is the API's OpenAPI 3 description, served at
// /openapi.json; TestOpenAPI checks every route and answer against it.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns the OpenAPI document.
func OpenAPI() []byte { return append([]byte(nil), openAPIDocument...) }

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

	Role        string           `json:"role,omitempty"`
	Reader      *readerJSON      `json:"reader,omitempty"`
	WriterLease *writerLeaseJSON `json:"writerLease,omitempty"`

	NodeError   string           `json:"nodeError,omitempty"`
	Handshake   *handshakeJSON   `json:"handshakeFailure,omitempty"`
	Waiting     *waitingJSON     `json:"waitingForNode,omitempty"`
	Diverged    *divergedJSON    `json:"diverged,omitempty"`
	CommitError *commitErrorJSON `json:"commitError,omitempty"`
}

// writerLeaseJSON is /status's writerLease.
type writerLeaseJSON struct {
	// Held and Lapsed are a writer's own (absent on a reader).
	Held   *bool `json:"held,omitempty"`
	Lapsed bool  `json:"lapsed,omitempty"`
	// The rest is the lease as stored (absent until a reader read it).
	Holder            string     `json:"holder,omitempty"`
	Epoch             int64      `json:"epoch,omitempty"`
	TTLSeconds        float64    `json:"ttlSeconds,omitempty"`
	RenewedAt         *time.Time `json:"renewedAt,omitempty"`
	RenewalAgeSeconds *float64   `json:"renewalAgeSeconds,omitempty"`
	ExpiresInSeconds  *float64   `json:"expiresInSeconds,omitempty"`
	Expired           *bool      `json:"expired,omitempty"`
	SessionWatched    bool       `json:"sessionWatched,omitempty"`
	SessionEnded      bool       `json:"sessionEnded,omitempty"`
	Since             *time.Time `json:"since,omitempty"`
}

func writerLeaseOf(l *WriterLease) *writerLeaseJSON {
	if l == nil {
		return nil
	}
	out := &writerLeaseJSON{Lapsed: l.Lapsed, Since: since(l.Since)}
	if l.Writer {
		held := l.Held
		out.Held = &held
	}
	if !l.Known {
		return out
	}
	secs := func(d time.Duration) *float64 {
		v := d.Round(time.Millisecond).Seconds()
		return &v
	}
	expired := l.Expired()
	out.Holder, out.Epoch, out.TTLSeconds, out.RenewedAt = l.Holder, l.Epoch, l.TTL.Seconds(), since(l.RenewedAt)
	out.RenewalAgeSeconds, out.ExpiresInSeconds, out.Expired = secs(l.RenewalAge), secs(l.ExpiresIn), &expired
	out.SessionWatched, out.SessionEnded = l.SessionWatched, l.SessionEnded
	return out
}

type readerJSON struct {
	Head       int64        `json:"head"`
	WriterHead int64        `json:"writerHead"`
	Lag        int64        `json:"lag"`
	Listening  bool         `json:"listening"`
	Notices    uint64       `json:"notices"`
	Polls      uint64       `json:"polls"`
	ReadError  string       `json:"readError,omitempty"`
	Replica    *replicaJSON `json:"replica,omitempty"`
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
	st, at, ok := s.ownAnswer(w, r)
	if !ok {
		return
	}
	out := statusJSON{
		Network: st.Network, NetworkMagic: st.NetworkMagic, Version: st.Version, Connected: st.Connected,
		NodeTip: tipOf(st.NodeTip), Follower: st.Follower, Committed: st.Committed, SyncProgress: st.SyncProgress,
		BlocksBehind: st.BlocksBehind, CommittedBehind: behind(st.NodeTip, st.Committed),
		HistorySeq: st.HistorySeq,
		Projection: projectionJSON{Seq: at.Seq, Block: at.Block, Lag: max(0, st.HistorySeq-at.Seq), Error: st.ProjectionError},
		Role:       st.Role, Reader: readerOf(st.Reader), WriterLease: writerLeaseOf(st.WriterLease),
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
	api.WriteJSON(w, http.StatusOK, out)
}

type healthJSON struct {
	Status string `json:"status"`
}

// healthz answers while the process serves.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := s.ownAnswer(w, r); !ok {
		return
	}
	api.WriteJSON(w, http.StatusOK, healthJSON{Status: "ok"})
}

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := s.ownAnswer(w, r); !ok {
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "public, max-age=300")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument)
}

// ownAnswer begins an answer of the service's own endpoints (/status,
// /readyz, /healthz, /openapi.json): it refuses any parameter but minSeq
// (which these answers do not wait for) and writes the position headers.
// It returns the status and the projection's position they show, and
// false when it answered an error.
func (s *Server) ownAnswer(w http.ResponseWriter, r *http.Request) (Status, contractstore.Position, bool) {
	q, err := api.ParseQuery(r)
	if err == nil {
		err = q.Allow()
	}
	if err != nil {
		native{s}.Fail(w, r, err)
		return Status{}, contractstore.Position{}, false
	}
	st := s.cfg.Status()
	at := s.cfg.Projection.Applied()
	api.SetPosition(w, at, st.NodeTip)
	return st, at, true
}
