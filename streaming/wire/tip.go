package wire

import (
	"encoding/json"
	"sync/atomic"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

// Tips is where the server stands, as frames carry it: the node's chain
// tip and the log's head, with the tip's JSON encoded once per change.
// Safe for concurrent use.
type Tips struct {
	node  func() chain.Tip // nil: a zero tip
	head  func() int64
	cache atomic.Pointer[encodedTip]
}

// encodedTip is a tip and its JSON.
type encodedTip struct {
	tip protocol.Tip
	js  []byte
}

// NewTips returns the tips of the node (node may be nil: a zero tip) and
// of the log's head.
func NewTips(node func() chain.Tip, head func() int64) *Tips {
	return &Tips{node: node, head: head}
}

// Head is the log's head seq.
func (t *Tips) Head() int64 { return t.head() }

// Tip returns where the server stands.
func (t *Tips) Tip() protocol.Tip {
	var p protocol.Tip
	if t.node != nil {
		p = protocol.MakeTip(t.node(), 0)
	}
	p.Seq = t.head()
	return p
}

// JSON returns the tip's JSON, encoded once per change.
func (t *Tips) JSON() []byte {
	p := t.Tip()
	if c := t.cache.Load(); c != nil && c.tip == p {
		return c.js
	}
	js, _ := json.Marshal(p)
	t.cache.Store(&encodedTip{tip: p, js: js})
	return js
}
