package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
)

// The runtime view: the read side of the Marlowe Runtime 1.0.0 REST API
// (its golden OpenAPI is testdata/marlowe-runtime/openapi-1.0.0.json), at
// RuntimePrefix on the query port, so that clients of the Runtime (the
// official TypeScript SDK, dApps) work against the follower by changing
// their base URL. It is a mapping over the same reads as the native API:
// resources and envelopes, links, servant-pagination Range paging, status
// headers and error bodies as the Runtime has them. Rejected steps and
// address payouts, which the Runtime does not have, are left out; the
// follower's extras are fields the Runtime does not use (scriptVersion,
// contractStatus, seq, lastSeq, ...), which its clients ignore.

// RuntimePrefix is where the runtime view is mounted.
const RuntimePrefix = "/runtime"

// RuntimeVersion is the Runtime version the view answers as
// (X-Runtime-Version): the TypeScript SDK accepts 1.0.0, 0.0.6 and 0.0.5.
const RuntimeVersion = "1.0.0"

// Headers of the runtime view.
const (
	HeaderRuntimeVersion   = "X-Runtime-Version"
	HeaderRuntimeTip       = "X-Runtime-Tip"
	HeaderRuntimeChainTip  = "X-Runtime-Chain-Tip"
	HeaderNetworkID        = "X-Network-Id"
	HeaderFollowerVersion  = "X-Marlowe-Follower-Version"
	mainnetMagic           = 764824073
	byronSlotLengthMillis  = 20_000
	runtimeJSONContentType = "application/json;charset=utf-8"
)

// runtimeError is the Runtime's error body.
type runtimeError struct {
	Message   string `json:"message"`
	ErrorCode string `json:"errorCode"`
	Details   any    `json:"details"`
}

// rtFail is an error answered in the Runtime's format.
type rtFail struct {
	status  int
	code    string
	message string
	details any
}

func (e *rtFail) Error() string { return e.message }

func rtBad(message string) error {
	return &rtFail{status: http.StatusBadRequest, code: "BadRequest", message: message}
}

func rtNotFound(message string) error {
	return &rtFail{status: http.StatusNotFound, code: "NotFound", message: message}
}

func rtNotFoundCode(message, code string) error {
	return &rtFail{status: http.StatusNotFound, code: code, message: message}
}

// rtWriteError writes a Runtime error body.
func rtWriteError(w http.ResponseWriter, status int, code, message string, details any) {
	writeJSON(w, status, runtimeError{Message: message, ErrorCode: code, Details: details})
}

// rtWriteJSON writes a view answer with the Runtime's content type.
func rtWriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := encodeJSON(v)
	if err != nil {
		rtWriteError(w, http.StatusInternalServerError, "Internal", "the answer could not be encoded", nil)
		return
	}
	h := w.Header()
	h.Set("Content-Type", runtimeJSONContentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// rtError answers err in the Runtime's format: its own errors as they are,
// the native API's bad requests as 400 BadRequest (the native code in
// details), unknown ids 404, a store that does not answer 503.
func (s *Server) rtError(w http.ResponseWriter, r *http.Request, err error) {
	var rf *rtFail
	var br *badRequest
	var re *rangeError
	switch {
	case errors.As(err, &rf):
		rtWriteError(w, rf.status, rf.code, rf.message, rf.details)
	case errors.As(err, &re):
		rtWriteError(w, http.StatusRequestedRangeNotSatisfiable, "RangeNotSatisfiable", re.message, nil)
	case errors.As(err, &br):
		rtWriteError(w, http.StatusBadRequest, "BadRequest", br.message, map[string]string{"code": br.code})
	case errors.Is(err, contractstore.ErrNotFound):
		rtWriteError(w, http.StatusNotFound, "NotFound", "not found", nil)
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		rtWriteError(w, 499, "Canceled", "the request was canceled", nil)
	default:
		s.log.Error("a read failed", zap.String("path", r.URL.Path), zap.Error(err))
		w.Header().Set(HeaderRetryAfter, "1")
		rtWriteError(w, http.StatusServiceUnavailable, "StoreUnavailable", "the store could not answer; retry later", nil)
	}
}

// rtBlockJSON is the Runtime's BlockHeader.
type rtBlockJSON struct {
	SlotNo          uint64       `json:"slotNo"`
	BlockNo         uint64       `json:"blockNo"`
	BlockHeaderHash chain.Hash32 `json:"blockHeaderHash"`
}

func rtBlock(b chain.BlockHeader) rtBlockJSON {
	return rtBlockJSON{SlotNo: b.Slot, BlockNo: b.BlockNo, BlockHeaderHash: b.Hash}
}

// rtTipJSON is the Runtime's ChainTip: a block and the time of its slot,
// or, before the first block, the genesis time.
type rtTipJSON struct {
	BlockHeader *rtBlockJSON `json:"blockHeader,omitempty"`
	SlotTimeUTC string       `json:"slotTimeUTC,omitempty"`
	GenesisTime string       `json:"genesisTimeUTC,omitempty"`
}

// utcTime shows a POSIX time in ms as the Runtime does (ISO 8601 in UTC,
// the fraction of a second only when there is one).
func utcTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.999Z07:00")
}

// genesisMillis is the network's start: the time of slot 0, where Byron
// slots (20 s) precede the Shelley-based eras of a public network.
func genesisMillis(c chain.SlotConfig) int64 {
	return c.ZeroTimeMillis - int64(c.ZeroSlot)*byronSlotLengthMillis
}

// rtTip encodes a tip header's value.
func (s *Server) rtTip(b chain.BlockHeader) string {
	var t rtTipJSON
	if b.Hash == (chain.Hash32{}) && b.Slot == 0 {
		t.GenesisTime = utcTime(genesisMillis(*s.cfg.Slots))
	} else {
		bh := rtBlock(b)
		t.BlockHeader, t.SlotTimeUTC = &bh, utcTime(s.cfg.Slots.SlotStart(b.Slot))
	}
	out, _ := json.Marshal(t)
	return string(out)
}

// networkID is the Runtime's X-Network-Id: mainnet or the network magic.
func networkID(magic uint32) string {
	if magic == mainnetMagic {
		return "mainnet"
	}
	return strconv.FormatUint(uint64(magic), 10)
}

// setRuntimeHeaders writes the Runtime's status headers: the node's tip,
// the follower's point (the Runtime's chain tip) and the position the
// answer reflects (the Runtime's tip).
func (s *Server) setRuntimeHeaders(w http.ResponseWriter, at contractstore.Position) {
	st := s.cfg.Status()
	h := w.Header()
	nodeTip := chain.BlockHeader{Slot: st.NodeTip.Point.Slot, BlockNo: st.NodeTip.BlockNo, Hash: st.NodeTip.Point.Hash}
	h.Set(HeaderNodeTip, s.rtTip(nodeTip))
	h.Set(HeaderRuntimeChainTip, s.rtTip(st.Follower))
	h.Set(HeaderRuntimeTip, s.rtTip(at.Block))
	h.Set(HeaderNetworkID, networkID(st.NetworkMagic))
	h.Set(HeaderRuntimeVersion, RuntimeVersion)
	if st.Version != "" {
		h.Set(HeaderFollowerVersion, st.Version)
	}
}

// rtPosition writes the native position headers (X-Marlowe-*), then the
// Runtime's status headers, which replace the native X-Node-Tip.
func (s *Server) rtPosition(w http.ResponseWriter, at contractstore.Position) {
	setPosition(w, at, s.cfg.Status().NodeTip)
	s.setRuntimeHeaders(w, at)
}

// rtQuery is a view request's query string: names the view does not know
// are ignored, as the Runtime ignores them.
type rtQuery struct{ v url.Values }

func parseRuntimeQuery(r *http.Request) (*rtQuery, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, rtBad("malformed query string: " + err.Error())
	}
	return &rtQuery{v: v}, nil
}

// list returns a repeatable parameter's values.
func (q *rtQuery) list(name string) ([]string, error) {
	vs := q.v[name]
	if len(vs) > maxValues {
		return nil, rtBad(fmt.Sprintf("parameter %s is given %d times; at most %d", name, len(vs), maxValues))
	}
	return vs, nil
}

// one returns a parameter given at most once.
func (q *rtQuery) one(name string) (string, error) {
	vs := q.v[name]
	if len(vs) > 1 {
		return "", rtBad(fmt.Sprintf("parameter %s is given %d times; it takes one value", name, len(vs)))
	}
	if len(vs) == 0 {
		return "", nil
	}
	return vs[0], nil
}

// rtBegin bounds the request's reads and waits for minSeq (the follower's
// extra: read your writes); when it returns false it has answered.
func (s *Server) rtBegin(w http.ResponseWriter, r *http.Request, q *rtQuery) (context.Context, context.CancelFunc, bool) {
	var minSeq int64
	if v, err := q.one("minSeq"); err != nil || v != "" {
		n, perr := strconv.ParseInt(v, 10, 64)
		if err == nil && (perr != nil || n < 0) {
			err = rtBad(fmt.Sprintf("minSeq %q: want a non-negative integer", clip(v)))
		}
		if err != nil {
			s.rtError(w, r, err)
			return nil, nil, false
		}
		minSeq = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	if minSeq > 0 {
		wctx, wcancel := context.WithTimeout(ctx, s.cfg.MinSeqWait)
		err := s.cfg.Projection.WaitFor(wctx, minSeq)
		wcancel()
		if err != nil {
			cancel()
			at := s.cfg.Projection.Applied()
			s.rtPosition(w, at)
			w.Header().Set(HeaderRetryAfter, "1")
			rtWriteError(w, http.StatusServiceUnavailable, "NotYetApplied",
				fmt.Sprintf("the projection has applied seq %d, not yet seq %d (waited %s); retry later", at.Seq, minSeq, s.cfg.MinSeqWait), nil)
			return nil, nil, false
		}
	}
	return ctx, cancel, true
}

// runtimeRoutes are the view's routes (below RuntimePrefix). Every answer
// carries the status headers: set first from the projection's position,
// replaced by the handler with the position of its reads.
func (s *Server) runtimeRoutes() []route {
	routes := s.runtimeHandlers()
	for i := range routes {
		h := routes[i].handler
		routes[i].handler = func(w http.ResponseWriter, r *http.Request) {
			s.setRuntimeHeaders(w, s.cfg.Projection.Applied())
			h(w, r)
		}
	}
	return routes
}

func (s *Server) runtimeHandlers() []route {
	p := RuntimePrefix
	return []route{
		{"GET " + p + "/healthcheck", s.rtHealthcheck},
		{"GET " + p + "/contracts", s.rtContractList},
		{"GET " + p + "/contracts/{contractId}", s.rtContractGet},
		{"GET " + p + "/contracts/{contractId}/transactions", s.rtTransactionList},
		{"GET " + p + "/contracts/{contractId}/transactions/{transactionId}", s.rtTransactionGet},
		{"GET " + p + "/contracts/{contractId}/next", s.rtNext},
		{"GET " + p + "/payouts", s.rtPayoutList},
		{"GET " + p + "/payouts/{payoutId}", s.rtPayoutGet},
		{"GET " + p + "/withdrawals", s.rtWithdrawalList},
		{"GET " + p + "/withdrawals/{withdrawalId}", s.rtWithdrawalGet},
		{p + "/", s.rtNotFound},
	}
}

// rtNotFound answers the view's paths without a route: the contract
// sources (a follower never sees the bundles clients POST to a Runtime),
// the Runtime's transaction building and submission (405), anything else.
func (s *Server) rtNotFound(w http.ResponseWriter, r *http.Request) {
	s.rtPosition(w, s.cfg.Projection.Applied())
	rest := strings.TrimPrefix(r.URL.Path, RuntimePrefix)
	if rest == "/contracts/sources" || strings.HasPrefix(rest, "/contracts/sources/") {
		rtWriteError(w, http.StatusNotFound, "NotFound", sourcesMessage, nil)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		probe := r.Clone(r.Context())
		probe.Method = http.MethodGet
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != RuntimePrefix+"/" && pattern != "/" {
			w.Header().Set("Allow", "GET, HEAD")
			rtWriteError(w, http.StatusMethodNotAllowed, "MethodNotAllowed",
				r.Method+" is not allowed here: a chain follower serves the Runtime's reads; it builds and submits no transactions", nil)
			return
		}
	}
	rtWriteError(w, http.StatusNotFound, "NotFound", "no such resource: "+strings.TrimSpace(r.URL.Path), nil)
}

const sourcesMessage = "contract sources are not available: a chain follower never sees the bundles clients upload to a Runtime; " +
	"the contracts themselves are at /contracts/{contractId}"

func (s *Server) rtHealthcheck(w http.ResponseWriter, r *http.Request) {
	s.rtPosition(w, s.cfg.Projection.Applied())
	w.Header().Set("Content-Type", runtimeJSONContentType)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}
