// Package runtime is the Marlowe Runtime view: the read side of the
// Marlowe Runtime 1.0.0 REST API (its golden OpenAPI is
// testdata/marlowe-runtime/openapi-1.0.0.json; ours, with corrections and
// extras, is served at Prefix/openapi.json), mounted at Prefix on the
// query port, so that clients of the Runtime (the official TypeScript SDK,
// dApps) work against the follower by changing their base URL.
//
// It is a mapping over the same reads as the native API (package query),
// through the same read helper (query/internal/api): resources and
// envelopes, links, servant-pagination Range paging, status headers and
// error bodies as the Runtime has them. Rejected steps and address
// payouts, which the Runtime does not have, are left out; the follower's
// extras are fields the Runtime does not use (scriptVersion,
// contractStatus, seq, lastSeq, ...), which its clients ignore.
package runtime

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// Prefix is where the view is mounted.
const Prefix = "/runtime"

// Version is the Runtime version the view answers as (X-Runtime-Version):
// the TypeScript SDK accepts 1.0.0, 0.0.6 and 0.0.5.
const Version = "1.0.0"

// Headers of the view.
const (
	HeaderVersion         = "X-Runtime-Version"
	HeaderTip             = "X-Runtime-Tip"
	HeaderChainTip        = "X-Runtime-Chain-Tip"
	HeaderNetworkID       = "X-Network-Id"
	HeaderFollowerVersion = "X-Marlowe-Follower-Version"
	HeaderTotalCount      = "Total-Count"
	mainnetMagic          = 764824073
	byronSlotLengthMillis = 20_000
	jsonContentType       = "application/json;charset=utf-8"
)

// Status is the service's state as the view's headers show it.
type Status struct {
	NetworkMagic uint32
	Version      string            // the follower's version
	NodeTip      chain.Tip         // the node's tip
	Follower     chain.BlockHeader // the newest block received (the Runtime's chain tip)
}

// Config configures the view.
type Config struct {
	// Env is what its reads run with (the native API's).
	Env *api.Env
	// Slots is the network's slot clock: the view shows times.
	Slots chain.SlotConfig
	// Status returns the service's state.
	Status func() Status
	// Route returns the pattern of the route that serves a request ("" or
	// a catch-all for none): a path the view has with another method is
	// 405.
	Route  func(r *http.Request) string
	Logger *zap.Logger
}

// View is the Runtime view's handlers.
type View struct {
	cfg         Config
	env         *api.Env
	log         *zap.Logger
	srcHandlers map[string]http.HandlerFunc
}

// New returns the view.
func New(cfg Config) (*View, error) {
	if cfg.Env == nil || cfg.Status == nil || cfg.Route == nil {
		return nil, errors.New("runtime: the read environment, the status and the router are required")
	}
	if cfg.Slots.SlotLengthMillis <= 0 {
		return nil, errors.New("runtime: the slot configuration has no slot length")
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	v := &View{cfg: cfg, env: cfg.Env, log: cfg.Logger}
	v.srcHandlers = v.sourceHandlers()
	return v, nil
}

// Routes are the view's routes. Every answer carries the status headers:
// those of the position of its read, or the projection's.
func (v *View) Routes() []api.Route {
	p := Prefix
	routes := []api.Route{
		{Pattern: "GET " + p + "/healthcheck", Handler: v.healthcheck},
		{Pattern: "GET " + p + "/openapi.json", Handler: v.openAPI},
		{Pattern: "GET " + p + "/contracts", Handler: v.contractList()},
		{Pattern: "GET " + p + "/contracts/{contractId}", Handler: v.contractGet()},
		{Pattern: "GET " + p + "/contracts/{contractId}/transactions", Handler: v.transactionList()},
		{Pattern: "GET " + p + "/contracts/{contractId}/transactions/{transactionId}", Handler: v.transactionGet()},
		{Pattern: "GET " + p + "/contracts/{contractId}/next", Handler: v.next()},
		{Pattern: "GET " + p + "/payouts", Handler: v.payoutList()},
		{Pattern: "GET " + p + "/payouts/{payoutId}", Handler: v.payoutGet()},
		{Pattern: "GET " + p + "/withdrawals", Handler: v.withdrawalList()},
		{Pattern: "GET " + p + "/withdrawals/{withdrawalId}", Handler: v.withdrawalGet()},
		{Pattern: p + "/", Handler: v.notFound},
	}
	for i := range routes {
		h := routes[i].Handler
		routes[i].Handler = func(w http.ResponseWriter, r *http.Request) {
			if r.PathValue("contractId") == "sources" {
				v.notFound(w, r) // the contract sources are not a contract
				return
			}
			h(w, r)
		}
	}
	return routes
}

// notFound answers the view's paths without a route: the contract sources
// (which the mux cannot route), the Runtime's transaction building and
// submission (405), anything else (404).
func (v *View) notFound(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, Prefix)
	if src, ok := strings.CutPrefix(rest, "/contracts/sources"); ok && v.sources(w, r, src) {
		return
	}
	v.setHeaders(w, v.env.Projection.Applied())
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		probe := r.Clone(r.Context())
		probe.Method = http.MethodGet
		if pattern := v.cfg.Route(probe); pattern != "" && pattern != Prefix+"/" && pattern != "/" {
			v.methodNotAllowed(w, r)
			return
		}
	}
	msg := "no such resource: " + strings.TrimSpace(r.URL.Path)
	if rest == "/contracts/sources" || strings.HasPrefix(rest, "/contracts/sources/") {
		msg += sourcesMessage
	}
	v.writeError(w, http.StatusNotFound, "NotFound", msg, codeDetails("not_found"))
}

// methodNotAllowed answers the methods a follower has no use for.
func (v *View) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "GET, HEAD")
	v.writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowed",
		r.Method+" is not allowed here: a chain follower serves the Runtime's reads; it builds and submits no transactions "+
			"and takes no uploads", codeDetails("method_not_allowed"))
}

const sourcesMessage = " (a follower has the contract sources the chain revealed, at /contracts/sources/{contractSourceId} " +
	"and its /adjacency and /closure; it takes no uploads)"

func (v *View) healthcheck(w http.ResponseWriter, r *http.Request) {
	v.setHeaders(w, v.env.Projection.Applied())
	w.Header().Set("Content-Type", jsonContentType)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// blockJSON is the Runtime's BlockHeader.
type blockJSON struct {
	SlotNo          uint64       `json:"slotNo"`
	BlockNo         uint64       `json:"blockNo"`
	BlockHeaderHash chain.Hash32 `json:"blockHeaderHash"`
}

func blockOf(b chain.BlockHeader) blockJSON {
	return blockJSON{SlotNo: b.Slot, BlockNo: b.BlockNo, BlockHeaderHash: b.Hash}
}

// tipJSON is the Runtime's ChainTip: a block and the time of its slot, or,
// before the first block, the genesis time.
type tipJSON struct {
	BlockHeader *blockJSON `json:"blockHeader,omitempty"`
	SlotTimeUTC string     `json:"slotTimeUTC,omitempty"`
	GenesisTime string     `json:"genesisTimeUTC,omitempty"`
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

// tip encodes a tip header's value (by hand: every answer has three;
// TestTipJSON compares it with encoding/json's).
func (v *View) tip(b chain.BlockHeader) string {
	var buf [256]byte
	out := buf[:0]
	if b.Hash == (chain.Hash32{}) && b.Slot == 0 {
		out = append(out, `{"genesisTimeUTC":"`...)
		out = append(out, utcTime(genesisMillis(v.cfg.Slots))...)
		return string(append(out, `"}`...))
	}
	out = append(out, `{"blockHeader":`...)
	out = appendBlock(out, b)
	out = append(out, `,"slotTimeUTC":"`...)
	out = append(out, utcTime(v.cfg.Slots.SlotStart(b.Slot))...)
	return string(append(out, `"}`...))
}

// networkID is the Runtime's X-Network-Id: mainnet or the network magic.
func networkID(magic uint32) string {
	if magic == mainnetMagic {
		return "mainnet"
	}
	return strconv.FormatUint(uint64(magic), 10)
}

// setHeaders writes the native position headers (X-Marlowe-*), then the
// Runtime's status headers, which replace the native X-Node-Tip: the
// node's tip, the follower's point (the Runtime's chain tip) and the
// position the answer reflects (the Runtime's tip).
func (v *View) setHeaders(w http.ResponseWriter, at contractstore.Position) {
	st := v.cfg.Status()
	api.SetPosition(w, at, st.NodeTip)
	h := w.Header()
	nodeTip := chain.BlockHeader{Slot: st.NodeTip.Point.Slot, BlockNo: st.NodeTip.BlockNo, Hash: st.NodeTip.Point.Hash}
	h.Set(api.HeaderNodeTip, v.tip(nodeTip))
	h.Set(HeaderChainTip, v.tip(st.Follower))
	h.Set(HeaderTip, v.tip(at.Block))
	h.Set(HeaderNetworkID, networkID(st.NetworkMagic))
	h.Set(HeaderVersion, Version)
	if st.Version != "" {
		h.Set(HeaderFollowerVersion, st.Version)
	}
}
