// Package chainsync follows a Cardano node over its node-to-client socket.
// The Follower actor owns the connection: it dials, intersects with the
// newest points the history store has committed, receives raw blocks (never
// decoding those the prefilter rules out), classifies them and hands Marlowe
// chain events downstream under back-pressure. It reconnects with capped
// exponential backoff whenever the node goes away and resumes by intersection.
package chainsync

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// Networks with a well-known magic.
const (
	MagicMainnet uint32 = 764824073
	MagicPreprod uint32 = 1
	MagicPreview uint32 = 2
)

// Default settings.
const (
	DefaultMinBackoff    = 200 * time.Millisecond
	DefaultMaxBackoff    = 30 * time.Second
	DefaultPipelineLimit = 50
	DefaultInFlight      = 256
)

// StartKind says where following starts when nothing is stored yet.
type StartKind uint8

// Start kinds.
const (
	StartOrigin StartKind = iota // from the first block
	StartTip                     // from the node's tip at the first connection
	StartPoint                   // from a given point
)

// Start is where following begins when the store has no checkpoint.
type Start struct {
	Kind  StartKind
	Point chain.Point // for StartPoint
}

// String returns "origin", "tip" or "SLOT.HASH".
func (s Start) String() string {
	switch s.Kind {
	case StartTip:
		return "tip"
	case StartPoint:
		return s.Point.String()
	}
	return "origin"
}

// ParseStart reads "origin", "tip" or "SLOT.HASH".
func ParseStart(s string) (Start, error) {
	switch strings.TrimSpace(s) {
	case "", "origin":
		return Start{Kind: StartOrigin}, nil
	case "tip":
		return Start{Kind: StartTip}, nil
	}
	p, err := chain.ParsePoint(s)
	if err != nil {
		return Start{}, err
	}
	return Start{Kind: StartPoint, Point: p}, nil
}

// Config configures a Follower.
type Config struct {
	// SocketPath is the node's local socket (MARLOWE_RT_NODE_SOCKET).
	SocketPath string
	// NetworkMagic identifies the network (MARLOWE_RT_NETWORK_MAGIC):
	// mainnet 764824073, preprod 1, preview 2.
	NetworkMagic uint32
	// Start is where to begin when no checkpoint is stored.
	Start Start
	// MinBackoff and MaxBackoff bound the wait between reconnection attempts;
	// the wait doubles after every failed attempt.
	MinBackoff, MaxBackoff time.Duration
	// PipelineLimit is how many chain-sync requests are kept outstanding.
	PipelineLimit int
	// InFlight bounds the events handed downstream and not yet done.
	InFlight int
}

// withDefaults fills zero fields and validates the rest.
func (c Config) withDefaults() (Config, error) {
	if c.SocketPath == "" {
		return c, errors.New("node socket path is not set (MARLOWE_RT_NODE_SOCKET)")
	}
	if c.NetworkMagic == 0 {
		return c, errors.New("network magic is not set (MARLOWE_RT_NETWORK_MAGIC)")
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = DefaultMinBackoff
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	if c.MaxBackoff < c.MinBackoff {
		return c, fmt.Errorf("max backoff %s is below min backoff %s", c.MaxBackoff, c.MinBackoff)
	}
	if c.PipelineLimit <= 0 {
		c.PipelineLimit = DefaultPipelineLimit
	}
	if c.PipelineLimit > 100 {
		return c, fmt.Errorf("pipeline limit %d: at most 100", c.PipelineLimit)
	}
	if c.InFlight <= 0 {
		c.InFlight = DefaultInFlight
	}
	return c, nil
}
