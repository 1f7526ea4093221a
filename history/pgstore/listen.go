package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/internal/sqlcommon"
	"github.com/marlowe-follower/follower/history/storage"
)

// Commit notices (history.CommitNotice) go out on a channel named after the
// schema that holds the store's tables, so that deployments sharing one
// server in different schemas never hear each other's commits (NOTIFY is
// per database already). Reader processes LISTEN on it (history.Mirror).

var _ history.CommitSource = (*Store)(nil)
var _ history.WALReporter = (*Store)(nil)

// channelPrefix begins every notice channel's name.
const channelPrefix = "marlowe_commits_"

// ChannelName returns the notice channel of the store in schema
// (storage.ChannelName with the commits' prefix).
func ChannelName(schema string) string { return storage.ChannelName(channelPrefix, schema) }

// channel returns the store's notice channel, resolving the schema the
// connections use (their search_path's first) once.
func (s *Store) channel(ctx context.Context) (string, error) {
	if c := s.channelName.Load(); c != nil {
		return *c, nil
	}
	schema := s.pg.Schema
	if schema == "" {
		if err := s.read.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
			return "", fmt.Errorf("reading the current schema: %w", err)
		}
	}
	c := ChannelName(schema)
	s.channelName.Store(&c)
	return c, nil
}

// Listen waits for commit notices on a connection of its own, outside the
// pool (see history.CommitSource). A notification that is not a notice
// is handed over with its error.
func (s *Store) Listen(ctx context.Context, listening func(pid uint32), notice func(history.CommitNotice, error)) error {
	if err := s.check(); err != nil {
		return err
	}
	channel, err := s.channel(ctx)
	if err != nil {
		return s.translate("listen", err)
	}
	cfg := s.pg.Pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "marlowe-follower listen"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return s.translate("listen", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return s.translate("listen", err)
	}
	if listening != nil {
		listening(conn.PgConn().PID())
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return s.translate("listen", err)
		}
		if n.Channel != channel {
			continue
		}
		notice(history.ParseNotice(n.Payload))
	}
}

// CommitProgress reads the committed head, the newest committed block and
// the stored node tip in one statement.
func (s *Store) CommitProgress(ctx context.Context) (history.CommitProgress, error) {
	if err := s.check(); err != nil {
		return history.CommitProgress{}, err
	}
	var out history.CommitProgress
	var tip sqlcommon.TipRow
	var b struct {
		slot, blockNo *int64
		hash          []byte
	}
	err := s.read.QueryRow(ctx, `SELECT (SELECT COALESCE(max(seq), 0) FROM records), t.slot, t.block_no, t.hash,
		b.slot, b.block_no, b.hash FROM tip t LEFT JOIN breadcrumbs b ON b.position = 0 WHERE t.id = 1`).Scan(
		&out.Head, &tip.Slot, &tip.BlockNo, &tip.Hash, &b.slot, &b.blockNo, &b.hash)
	if err != nil {
		return history.CommitProgress{}, s.translate("commit progress", err)
	}
	if out.Tip, err = tip.Tip(); err != nil {
		return history.CommitProgress{}, s.translate("commit progress", err)
	}
	if b.slot != nil && b.blockNo != nil {
		if out.Committed, err = (sqlcommon.HeaderRow{Slot: *b.slot, BlockNo: *b.blockNo, Hash: b.hash}).Header(); err != nil {
			return history.CommitProgress{}, s.translate("commit progress", err)
		}
	}
	return out, nil
}

// WALPosition returns the server's write-ahead log position: the replayed
// position on a standby (pg_last_wal_replay_lsn), the current one on a
// primary (pg_current_wal_lsn).
func (s *Store) WALPosition(ctx context.Context) (uint64, bool, error) {
	if err := s.check(); err != nil {
		return 0, false, err
	}
	var standby bool
	var lsn *string
	err := s.read.QueryRow(ctx, `SELECT pg_is_in_recovery(), CASE WHEN pg_is_in_recovery()
		THEN pg_last_wal_replay_lsn()::text ELSE pg_current_wal_lsn()::text END`).Scan(&standby, &lsn)
	if err != nil {
		return 0, false, s.translate("wal position", err)
	}
	if lsn == nil {
		return 0, standby, s.translate("wal position", errors.New("the standby has replayed nothing yet"))
	}
	pos, err := ParseLSN(*lsn)
	return pos, standby, s.translate("wal position", err)
}

// ParseLSN reads a PostgreSQL log sequence number ("16/B374D848").
func ParseLSN(text string) (uint64, error) {
	hi, lo, ok := strings.Cut(text, "/")
	if !ok {
		return 0, fmt.Errorf("LSN %q: want HI/LO", text)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("LSN %q: %w", text, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("LSN %q: %w", text, err)
	}
	return h<<32 | l, nil
}
