package sqlcommon

import (
	"context"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/storage"
)

// Querier is what the reads below need of a database: the pool, or a read
// transaction for the reads made of several statements. Each backend
// adapts its driver to it.
type Querier interface {
	// Row runs a statement that returns one row and scans it into dest;
	// it returns the driver's error (a missing row's too).
	Row(ctx context.Context, query string, args []any, dest ...any) error
	// Each runs a statement and scans every row into dest, calling fn
	// after each.
	Each(ctx context.Context, query string, args []any, dest []any, fn func() error) error
}

// The reads' statements, in each dialect's placeholders.
type readStatements struct {
	head, recordGet, recordRecent, contract, tags, parties, checkpoint, breadcrumbs, utxos, changes string
}

var reads = func() [2]readStatements {
	build := func(d storage.Dialect) readStatements {
		bind := func(q string) string { return storage.Rebind(d, q) }
		return readStatements{
			head:         `SELECT COALESCE(max(seq), 0) FROM records`,
			recordGet:    bind(`SELECT ` + RecordColumns + ` FROM records WHERE seq = ?`),
			recordRecent: bind(`SELECT ` + RecordRefColumns + ` FROM records WHERE slot > ? ORDER BY seq`),
			contract:     bind(`SELECT ` + ContractColumns + ` FROM contracts WHERE contract_id = ?`),
			tags:         bind(`SELECT tag FROM contract_tags WHERE contract_id = ? ORDER BY tag`),
			parties: bind(`SELECT address, role_currency, role_name FROM contract_parties
				WHERE contract_id = ? ORDER BY added_seq, party_key`),
			checkpoint: `SELECT (SELECT COALESCE(max(seq), 0) FROM records),
				t.slot, t.block_no, t.hash, h.slot, h.block_no, h.hash FROM tip t, horizon h WHERE t.id = 1 AND h.id = 1`,
			breadcrumbs: `SELECT slot, block_no, hash FROM breadcrumbs ORDER BY position`,
			utxos:       `SELECT ` + UTxOColumns + ` FROM utxos ORDER BY ref`,
			changes:     `SELECT ` + ChangeColumns + ` FROM utxo_changes ORDER BY slot`,
		}
	}
	var s [2]readStatements
	s[Postgres], s[SQLite] = build(storage.DialectPostgres), build(storage.DialectSQLite)
	return s
}()

// Head reads the seq of the newest committed record (0 when empty).
func Head(ctx context.Context, q Querier, d Dialect) (int64, error) {
	var head int64
	err := q.Row(ctx, reads[d].head, nil, &head)
	return head, err
}

// RecordList reads a page of records with the statement RecordListQuery
// builds (scan: see there).
func RecordList(ctx context.Context, q Querier, d Dialect, p *record.RecordListParams, scan bool) ([]record.Record, error) {
	query, args := RecordListQuery(d, p, scan)
	var row RecordRow
	return collect(ctx, q, query, args, row.Dest(), make([]record.Record, 0, min(Limit(p.Limit), 1024)), row.Record)
}

// collect appends to out every row of query, each scanned into dest and
// decoded by decode.
func collect[T any](ctx context.Context, q Querier, query string, args, dest []any, out []T, decode func() (T, error)) ([]T, error) {
	err := q.Each(ctx, query, args, dest, func() error {
		v, err := decode()
		out = append(out, v)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RecordRecent reads the short form of every record of a block after
// afterSlot (markers and rolled-back records too), in seq order.
func RecordRecent(ctx context.Context, q Querier, d Dialect, afterSlot uint64) ([]record.RecordRef, error) {
	slot, err := Int64("slot", afterSlot)
	if err != nil {
		return nil, err
	}
	var row RecordRefRow
	return collect(ctx, q, reads[d].recordRecent, []any{slot}, row.Dest(), nil, row.Ref)
}

// RecordGet reads one record.
func RecordGet(ctx context.Context, q Querier, d Dialect, seq int64) (*record.Record, error) {
	var row RecordRow
	if err := q.Row(ctx, reads[d].recordGet, []any{seq}, row.Dest()...); err != nil {
		return nil, err
	}
	rec, err := row.Record()
	if err != nil {
		return nil, err
	}
	return &rec, nil
}

// ContractGet reads a contract's index entry; tags come sorted, parties in
// the order they were added. Run it in a read transaction.
func ContractGet(ctx context.Context, q Querier, d Dialect, id chain.TxOutRef) (*record.ContractIndex, error) {
	key := []any{RefBytes(id)}
	var row ContractRow
	if err := q.Row(ctx, reads[d].contract, key, row.Dest()...); err != nil {
		return nil, err
	}
	var tags []string
	var tag string
	if err := q.Each(ctx, reads[d].tags, key, []any{&tag}, func() error {
		tags = append(tags, tag)
		return nil
	}); err != nil {
		return nil, err
	}
	var parties []record.Party
	var addr *string
	var cur, role []byte
	if err := q.Each(ctx, reads[d].parties, key, []any{&addr, &cur, &role}, func() error {
		parties = append(parties, PartyFromColumns(addr, cur, role))
		return nil
	}); err != nil {
		return nil, err
	}
	return ContractFromRow(&row, tags, parties)
}

// CheckpointGet reads what the follower resumes from. Run it in a read
// transaction: one snapshot.
func CheckpointGet(ctx context.Context, q Querier, d Dialect) (*history.Checkpoint, error) {
	cp := &history.Checkpoint{}
	var tip TipRow
	var hz HeaderRow
	if err := q.Row(ctx, reads[d].checkpoint, nil,
		&cp.Head, &tip.Slot, &tip.BlockNo, &tip.Hash, &hz.Slot, &hz.BlockNo, &hz.Hash); err != nil {
		return nil, err
	}
	var err error
	if cp.Tip, err = tip.Tip(); err != nil {
		return nil, err
	}
	if cp.Horizon, err = hz.Header(); err != nil {
		return nil, err
	}
	var h HeaderRow
	header := func() (chain.BlockHeader, error) { return h.Header() }
	if cp.Breadcrumbs, err = collect(ctx, q, reads[d].breadcrumbs, nil, []any{&h.Slot, &h.BlockNo, &h.Hash}, nil, header); err != nil {
		return nil, err
	}
	var u UTxORow
	if cp.UTxOs, err = collect(ctx, q, reads[d].utxos, nil, u.Dest(), nil, u.UTxO); err != nil {
		return nil, err
	}
	var c ChangeRow
	if cp.Recent, err = collect(ctx, q, reads[d].changes, nil, c.Dest(), nil, c.Changes); err != nil {
		return nil, err
	}
	return cp, nil
}

// Reads are the history.Backend reads both backends share, made on a
// database: the Querier of its read pool, a way to run several statements
// on one snapshot, and the store's error translation. A backend embeds it
// and adds RecordList, whose plan differs.
type Reads struct {
	Dialect  Dialect
	Pool     Querier
	Snapshot func(ctx context.Context, fn func(Querier) error) error
	Errs     *storage.Errors
}

// Head returns the seq of the newest committed record (0 when empty).
func (r *Reads) Head(ctx context.Context) (int64, error) {
	if err := r.Errs.Check(); err != nil {
		return 0, err
	}
	head, err := Head(ctx, r.Pool, r.Dialect)
	return head, r.Errs.Translate("head", err)
}

// RecordRecent returns the short form of every record of a block after
// afterSlot (markers and rolled-back records too), in seq order.
func (r *Reads) RecordRecent(ctx context.Context, afterSlot uint64) ([]record.RecordRef, error) {
	if err := r.Errs.Check(); err != nil {
		return nil, err
	}
	out, err := RecordRecent(ctx, r.Pool, r.Dialect, afterSlot)
	return out, r.Errs.Translate("record recent", err)
}

// RecordGet reads one record; record.ErrNotFound when there is none.
func (r *Reads) RecordGet(ctx context.Context, seq int64) (*record.Record, error) {
	if err := r.Errs.Check(); err != nil {
		return nil, err
	}
	rec, err := RecordGet(ctx, r.Pool, r.Dialect, seq)
	return rec, r.Errs.Translate("record get", err)
}

// ContractGet reads a contract's index entry, on one snapshot;
// record.ErrNotFound when the contract was never created. Tags come
// sorted, parties in the order they were added.
func (r *Reads) ContractGet(ctx context.Context, id chain.TxOutRef) (*record.ContractIndex, error) {
	if err := r.Errs.Check(); err != nil {
		return nil, err
	}
	var out *record.ContractIndex
	err := r.Snapshot(ctx, func(q Querier) (err error) {
		out, err = ContractGet(ctx, q, r.Dialect, id)
		return err
	})
	return out, r.Errs.Translate("contract get", err)
}

// CheckpointGet reads what the follower resumes from, on one snapshot.
func (r *Reads) CheckpointGet(ctx context.Context) (*history.Checkpoint, error) {
	if err := r.Errs.Check(); err != nil {
		return nil, err
	}
	var cp *history.Checkpoint
	err := r.Snapshot(ctx, func(q Querier) (err error) {
		cp, err = CheckpointGet(ctx, q, r.Dialect)
		return err
	})
	return cp, r.Errs.Translate("checkpoint get", err)
}
