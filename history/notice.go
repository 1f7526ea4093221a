package history

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// CommitNotice is what a writer announces with each commit: the log's head
// after it, the newest block of the committed checkpoint and the node's tip
// as the batch was made. The PostgreSQL backend sends it with NOTIFY in the
// commit's transaction, so that a listener hears of a commit only once it is
// durable.
type CommitNotice struct {
	Seq   int64             `json:"seq"`
	Block chain.BlockHeader `json:"block"`
	Tip   chain.Tip         `json:"tip"`
}

// MarshalNotice returns a notice's payload text.
func MarshalNotice(n CommitNotice) string {
	b, _ := json.Marshal(n) // plain numbers and hex strings: cannot fail
	return string(b)
}

// ParseNotice reads a notice's payload text; a payload that is not one
// (another program notifying on the channel) is an error.
func ParseNotice(payload string) (CommitNotice, error) {
	var n CommitNotice
	if err := json.Unmarshal([]byte(payload), &n); err != nil {
		return CommitNotice{}, fmt.Errorf("commit notice %.80q: %w", payload, err)
	}
	if n.Seq < 0 {
		return CommitNotice{}, fmt.Errorf("commit notice %.80q: negative seq", payload)
	}
	return n, nil
}

// CommitProgress is where the writer stands as its database holds it: the
// committed head, the newest block of the committed checkpoint (zero before
// the first) and the node's tip stored with it.
type CommitProgress struct {
	Head      int64
	Committed chain.BlockHeader
	Tip       chain.Tip
}

// CommitSource is the writer's database as a reader process sees it
// (history/pgstore implements it): it tells of commits as they happen and
// answers where the writer stands.
type CommitSource interface {
	// Listen holds a connection of its own that waits for commit notices.
	// It calls listening with the connection's server process id once it
	// listens, then notice for each notice (err set for a payload that is
	// not one), until ctx ends or the connection fails; it returns why.
	Listen(ctx context.Context, listening func(pid uint32), notice func(CommitNotice, error)) error
	// CommitProgress reads the committed head, point and tip.
	CommitProgress(ctx context.Context) (CommitProgress, error)
}

// WALReporter is a PostgreSQL database that tells its write-ahead log
// position: the current insert position on a primary, the replayed one on
// a standby. A reader on a replica compares the two for its lag in bytes.
type WALReporter interface {
	WALPosition(ctx context.Context) (lsn uint64, standby bool, err error)
}
