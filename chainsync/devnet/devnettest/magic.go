// Package devnettest holds the devnet nodes that tests at several floors
// set up the same way.
package devnettest

import (
	"context"
	"testing"

	"github.com/marlowe-follower/follower/chainsync/devnet"
)

// WrongMagic is the network magic a MagicNode serves first: not the
// follower's (devnet.NetworkMagic, 42).
const WrongMagic = 43

// MagicNode is a devnet node for the handshake tests: a pregenerated chain
// of 20 blocks without rollbacks, served at a socket with WrongMagic until
// Restart brings it back with the follower's magic.
type MagicNode struct {
	*devnet.Devnet
	socket string
	gcfg   devnet.GeneratorConfig
}

// StartWrongMagic starts the node at socket with WrongMagic.
func StartWrongMagic(ctx context.Context, t testing.TB, socket string) *MagicNode {
	t.Helper()
	n := &MagicNode{socket: socket, gcfg: devnet.DefaultGeneratorConfig()}
	n.gcfg.RollbackEvery = 0
	n.start(ctx, t, WrongMagic)
	return n
}

// Restart closes the node and starts it again, on the same socket and
// chain, with the follower's magic (devnet.NetworkMagic). The caller
// closes it.
func (n *MagicNode) Restart(ctx context.Context, t testing.TB) {
	t.Helper()
	_ = n.Close()
	n.start(ctx, t, devnet.NetworkMagic)
}

func (n *MagicNode) start(ctx context.Context, t testing.TB, magic uint32) {
	t.Helper()
	dn, err := devnet.Start(ctx, devnet.RunConfig{SocketPath: n.socket, NetworkMagic: magic, Generator: n.gcfg, Blocks: 20, Pregenerate: true})
	if err != nil {
		t.Fatal(err)
	}
	n.Devnet = dn
}
