package streaming

import (
	"sync"

	"github.com/marlowe-follower/follower/history/record"
)

// recordCache holds the JSON of the records the server encoded last, so
// that a commit pushed to many subscriptions is encoded once: every
// subscription whose filter matches a record gets the same bytes, and its
// frames differ only in their stream name, batch number, cursor and tip.
//
// A record is known by its seq and the seq of the rollback marker that
// undid it (0 when none): every other field of a record at a seq is
// written once and never changes, so the two name its JSON exactly (the
// log is append-only; a rollback only sets rolledBackBy). The cache is
// bounded: cacheShards maps of at most cacheShardEntries entries, each
// with the generation before it; when a map fills, it becomes the old
// generation and the one before is dropped. Subscribers at the tip read
// the same few records, so a small cache serves them all; one far behind
// misses and encodes its records itself, as before.
type recordCache struct {
	shards [cacheShards]cacheShard
}

const (
	cacheShards       = 32
	cacheShardEntries = 64
)

type cacheShard struct {
	mu       sync.Mutex
	cur, old map[recordKey][]byte
}

type recordKey struct{ seq, rolledBackBy int64 }

func keyOf(r *record.Record) recordKey {
	k := recordKey{seq: r.Seq}
	if r.RolledBackBy != nil {
		k.rolledBackBy = *r.RolledBackBy
	}
	return k
}

// encoded returns the record's JSON (appendRecord's), shared: callers
// must not modify it.
func (c *recordCache) encoded(r *record.Record) []byte {
	k := keyOf(r)
	sh := &c.shards[uint64(k.seq)%cacheShards]
	sh.mu.Lock()
	b, ok := sh.cur[k]
	if !ok {
		if b, ok = sh.old[k]; ok {
			sh.put(k, b)
		}
	}
	sh.mu.Unlock()
	if ok {
		return b
	}
	// Encoded outside the lock: two subscriptions that miss at once both
	// encode it, and the second keeps the first one's bytes.
	b = appendRecord(make([]byte, 0, len(r.Payload)+320), r)
	sh.mu.Lock()
	if have, ok := sh.cur[k]; ok {
		b = have
	} else {
		sh.put(k, b)
	}
	sh.mu.Unlock()
	return b
}

// put adds an entry (sh.mu held), starting a new generation when the
// current one is full.
func (sh *cacheShard) put(k recordKey, b []byte) {
	if len(sh.cur) >= cacheShardEntries {
		sh.old, sh.cur = sh.cur, nil
	}
	if sh.cur == nil {
		sh.cur = make(map[recordKey][]byte, cacheShardEntries)
	}
	sh.cur[k] = b
}

// cacheWindow: only records within this many seqs of the head are
// cached. Those are what subscribers at the tip read, all of them at once;
// a subscription catching up far behind encodes its records straight into
// its frame, and does not push the tip's records out of the cache.
const cacheWindow = cacheShards * cacheShardEntries / 2

// appendRecord appends the record's JSON, from the cache when the record
// is near the head (a nil cache encodes every record).
func (c *recordCache) appendRecord(buf []byte, r *record.Record, head int64) []byte {
	if c == nil || r.Seq <= head-cacheWindow {
		return appendRecord(buf, r)
	}
	return append(buf, c.encoded(r)...)
}
