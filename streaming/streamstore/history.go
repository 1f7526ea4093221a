package streamstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/marlowe-follower/follower/history/record"
)

// ErrHistoryMismatch: the durable streams were recorded against another
// history log than the one the service opened, or one that ends before
// their cursors (a history restored from an older backup than the streams).
var ErrHistoryMismatch = errors.New("the durable streams do not match the history log")

// MismatchAction is the operator's choice a mismatch leaves.
const MismatchAction = "either reset the durable streams (marlowe-follower reset --streams --yes: every stream " +
	"is deleted, its consumers start again) or restore backups of the history and the streams taken together"

// HistoryLog is what CheckHistory reads of the history log.
type HistoryLog interface {
	// Head is the committed head seq (0: empty).
	Head() int64
	// RecordGet reads the record at seq.
	RecordGet(ctx context.Context, seq int64) (*record.Record, error)
}

// MovingHistoryLog is a HistoryLog other processes commit to while the
// check runs (a writer's standby or a reader starting beside a running
// writer): its committed head is read again after the streams' cursors, so
// that a cursor acknowledged meanwhile, which can only point at a record
// committed before its acknowledgement, is not taken for one beyond the log.
type MovingHistoryLog interface {
	HistoryLog
	// CurrentHead reads the committed head now.
	CurrentHead(ctx context.Context) (int64, error)
}

// maxNamed caps the streams an error names.
const maxNamed = 5

// CheckHistory checks, before any stream is served, that the streams in st
// belong to the history log h of the network magic: the identity the
// streams recorded last (network, first record's block, the block of the
// head seen, when that is still in the log) is h's, and no stream's cursor
// is beyond h's head. On success it records h's identity as the one the
// streams now stand on. Otherwise it changes nothing and returns an error
// wrapping ErrHistoryMismatch that says what differs and what the operator
// can do (MismatchAction).
func CheckHistory(ctx context.Context, st Store, magic uint32, h HistoryLog) error {
	head := h.Head()
	now := HistoryIdentity{NetworkMagic: magic, HeadSeq: head}
	if head > 0 {
		first, err := h.RecordGet(ctx, 1)
		if err != nil {
			return fmt.Errorf("stream store: reading the history's first record: %w", err)
		}
		last, err := h.RecordGet(ctx, head)
		if err != nil {
			return fmt.Errorf("stream store: reading the history's head record: %w", err)
		}
		now.FirstSlot, now.FirstHash, now.HeadHash = first.Block.Slot, first.Block.Hash, last.Block.Hash
	}
	seen, err := st.HistoryGet(ctx)
	switch {
	case errors.Is(err, ErrNotFound):
		seen = nil // streams recorded before the identity was kept: the cursors are checked
	case err != nil:
		return fmt.Errorf("stream store: %w", err)
	}
	if seen != nil {
		if why := differs(ctx, seen, &now, h); why != "" {
			return fmt.Errorf("%w: %s; %s", ErrHistoryMismatch, why, MismatchAction)
		}
	}
	if err := checkCursors(ctx, st, head, h); err != nil {
		return err
	}
	if err := st.HistorySet(ctx, &now); err != nil {
		return fmt.Errorf("stream store: recording the history's identity: %w", err)
	}
	return nil
}

// differs says how the history the streams saw is not h ("" when it is).
func differs(ctx context.Context, seen, now *HistoryIdentity, h HistoryLog) string {
	if seen.NetworkMagic != now.NetworkMagic {
		return fmt.Sprintf("the streams were recorded on network magic %d, the history is of network magic %d",
			seen.NetworkMagic, now.NetworkMagic)
	}
	if seen.HeadSeq == 0 || now.HeadSeq == 0 {
		return "" // one side saw no record: nothing to compare; the cursors decide
	}
	if seen.FirstHash != now.FirstHash || seen.FirstSlot != now.FirstSlot {
		return fmt.Sprintf("the streams were recorded against a history whose first record is in block %s (slot %d), "+
			"this history's first record is in block %s (slot %d): it is another history",
			seen.FirstHash, seen.FirstSlot, now.FirstHash, now.FirstSlot)
	}
	if seen.HeadSeq > now.HeadSeq {
		return "" // an older copy of the same log: the cursors decide
	}
	r, err := h.RecordGet(ctx, seen.HeadSeq)
	if err != nil {
		return fmt.Sprintf("the history's record %d, the head the streams saw, cannot be read: %v", seen.HeadSeq, err)
	}
	if r.Block.Hash != seen.HeadHash {
		return fmt.Sprintf("the streams saw seq %d in block %s, this history has seq %d in block %s: "+
			"the log was followed again or replaced since", seen.HeadSeq, seen.HeadHash, seen.HeadSeq, r.Block.Hash)
	}
	return ""
}

// checkCursors refuses streams whose acknowledged position is beyond head
// (for a MovingHistoryLog, beyond its head read after the cursors).
func checkCursors(ctx context.Context, st Store, head int64, h HistoryLog) error {
	type position struct {
		name string
		at   int64
	}
	var ahead []position
	p := StreamListParams{}
	for {
		page, err := st.StreamList(ctx, &p)
		if err != nil {
			return fmt.Errorf("stream store: %w", err)
		}
		for i := range page {
			s := &page[i]
			c, err := record.ParseCursor(s.Cursor)
			if err != nil {
				return fmt.Errorf("stream store: stream %s: %w", s.Name, err)
			}
			if at := max(c.Seq, c.Snapshot); at > head {
				ahead = append(ahead, position{s.Name, at})
			}
		}
		if len(page) < p.EffectiveLimit() {
			break
		}
		p.After = page[len(page)-1].Name
	}
	if len(ahead) > 0 {
		if m, ok := h.(MovingHistoryLog); ok {
			now, err := m.CurrentHead(ctx)
			if err != nil {
				return fmt.Errorf("stream store: reading the history's head: %w", err)
			}
			head = max(head, now)
		}
	}
	var beyond []string
	count := 0
	for _, a := range ahead {
		if a.at > head {
			count++
			if len(beyond) < maxNamed {
				beyond = append(beyond, fmt.Sprintf("%s at %d", a.name, a.at))
			}
		}
	}
	if count == 0 {
		return nil
	}
	more := ""
	if count > len(beyond) {
		more = fmt.Sprintf(" and %d more", count-len(beyond))
	}
	return fmt.Errorf("%w: %d durable streams have cursors beyond the history's head %d (%s%s): "+
		"the history is older than the streams (restored from an older backup?) and its next records would not "+
		"be the ones these consumers are owed; %s", ErrHistoryMismatch, count, head, strings.Join(beyond, ", "), more, MismatchAction)
}
