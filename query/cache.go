package query

import (
	"container/list"
	"sync"
	"sync/atomic"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
)

// DefaultCacheBytes is a good size for a ContractCache.
const DefaultCacheBytes = 64 << 20

// ContractCache keeps the encoded answers of contract lookups in memory,
// least recently used first out, within a byte budget. It is exact: the
// projection calls Invalidate after each commit with the contracts it
// changed, before its applied position moves (contracts.Config.OnCommit),
// so an entry is never older than the position an answer reports:
//
//   - an answer served from the cache reports the greater of the applied
//     position read before the lookup and the position the entry was read
//     at; the contract did not change in between, or the entry would be gone;
//   - an entry read from the store at seq R is kept only if no commit was
//     invalidated after R meanwhile (else it may predate a change).
//
// Only a process that runs the projection can use one; a reader replica
// without it reads the store every time.
type ContractCache struct {
	mu       sync.Mutex
	maxBytes int
	bytes    int
	lastInv  int64 // seq of the newest invalidation
	entries  map[chain.TxOutRef]*list.Element
	lru      list.List // of *cacheEntry, most recent first

	hits, misses atomic.Uint64
}

type cacheEntry struct {
	id   chain.TxOutRef
	body []byte
	at   contractstore.Position
}

// NewContractCache returns a cache of at most maxBytes of answers.
func NewContractCache(maxBytes int) *ContractCache {
	return &ContractCache{maxBytes: maxBytes, entries: map[chain.TxOutRef]*list.Element{}}
}

// Invalidate drops the contracts a commit at seq changed.
func (c *ContractCache) Invalidate(seq int64, changed []chain.TxOutRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastInv = max(c.lastInv, seq)
	for _, id := range changed {
		if el, ok := c.entries[id]; ok {
			c.remove(el)
		}
	}
}

func (c *ContractCache) remove(el *list.Element) {
	e := el.Value.(*cacheEntry)
	c.lru.Remove(el)
	delete(c.entries, e.id)
	c.bytes -= len(e.body)
}

// get returns a cached answer and the position it was read at.
func (c *ContractCache) get(id chain.TxOutRef) ([]byte, contractstore.Position, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[id]
	if !ok {
		c.misses.Add(1)
		return nil, contractstore.Position{}, false
	}
	c.hits.Add(1)
	c.lru.MoveToFront(el)
	e := el.Value.(*cacheEntry)
	return e.body, e.at, true
}

// put keeps an answer read at position at, unless a commit after it was
// invalidated meanwhile.
func (c *ContractCache) put(id chain.TxOutRef, body []byte, at contractstore.Position) {
	if len(body) > c.maxBytes/16 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if at.Seq < c.lastInv {
		return
	}
	if el, ok := c.entries[id]; ok {
		c.remove(el)
	}
	c.entries[id] = c.lru.PushFront(&cacheEntry{id: id, body: body, at: at})
	c.bytes += len(body)
	for c.bytes > c.maxBytes {
		c.remove(c.lru.Back())
	}
}

// Stats returns the hits and misses so far.
func (c *ContractCache) Stats() (hits, misses uint64) { return c.hits.Load(), c.misses.Load() }
