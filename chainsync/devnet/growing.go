package devnet

import (
	"context"
	"fmt"
)

// GenerateBlocks returns the first n blocks the generator of cfg makes,
// in the order it makes them; with rollbacks (cfg.RollbackEvery) that
// order has forks in it, without them it is one chain.
func GenerateBlocks(cfg GeneratorConfig, n int) ([]StoredBlock, error) {
	g, err := NewGenerator(cfg)
	if err != nil {
		return nil, err
	}
	out := make([]StoredBlock, 0, n)
	for len(out) < n {
		op, err := g.Next()
		if err != nil {
			return nil, err
		}
		if op.Block != nil {
			out = append(out, *op.Block)
		}
	}
	return out, nil
}

// GrowingNode is a node serving a prefix of a chain known in advance,
// grown on demand: what a test wants of a node that is behind, or that
// is fed block by block.
type GrowingNode struct {
	*Node
	blocks []StoredBlock
	store  *ChainStore
}

// ServeGrowing starts a node on socket (network magic magic) serving the
// first n of blocks, which must be one chain.
func ServeGrowing(ctx context.Context, socket string, magic uint32, blocks []StoredBlock, n int) (*GrowingNode, error) {
	g := &GrowingNode{blocks: blocks, store: NewChainStore()}
	if err := g.Grow(n); err != nil {
		return nil, err
	}
	node, err := New(Config{SocketPath: socket, NetworkMagic: magic, Store: g.store})
	if err != nil {
		return nil, err
	}
	if err := node.Start(ctx); err != nil {
		return nil, err
	}
	g.Node = node
	return g, nil
}

// Grow serves the chain up to its nth block (nothing when it serves as
// many already).
func (g *GrowingNode) Grow(n int) error {
	if n > len(g.blocks) {
		return fmt.Errorf("devnet: grow to %d blocks of a chain of %d", n, len(g.blocks))
	}
	for i := g.store.Len(); i < n; i++ {
		if err := g.store.Append(g.blocks[i]); err != nil {
			return err
		}
	}
	return nil
}

// Store is the chain store the node serves.
func (g *GrowingNode) Store() *ChainStore { return g.store }
