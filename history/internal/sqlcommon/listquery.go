package sqlcommon

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/marlowe-follower/follower/history/record"
)

// Dialect tells the SQL builders how a backend spells parameters and lists.
type Dialect uint8

// Dialects.
const (
	// Postgres numbers parameters ($1, $2, ...) and passes a list as one
	// array parameter, so that a statement's text does not depend on the
	// lengths of the filter's lists (one prepared statement per shape).
	Postgres Dialect = iota
	// SQLite uses ? and expands a list into one parameter per element.
	SQLite
)

// Page sizes of RecordList.
const (
	// DefaultLimit is the page size when RecordListParams.Limit is not positive.
	DefaultLimit = 1000
	// MaxLimit caps RecordListParams.Limit.
	MaxLimit = 10000
)

// Limit returns the page size a RecordList call asks for, defaulted and capped.
func Limit(n int) int {
	switch {
	case n <= 0:
		return DefaultLimit
	case n > MaxLimit:
		return MaxLimit
	}
	return n
}

// builder accumulates a statement and its arguments.
type builder struct {
	d    Dialect
	sb   strings.Builder
	args []any
}

func (b *builder) w(s ...string) {
	for _, x := range s {
		b.sb.WriteString(x)
	}
}

// arg adds an argument and returns its placeholder.
func (b *builder) arg(v any) string {
	b.args = append(b.args, v)
	if b.d == Postgres {
		return "$" + strconv.Itoa(len(b.args))
	}
	return "?"
}

// in writes "expr IN list" for a non-empty list.
func in[T any](b *builder, expr string, vals []T) {
	if b.d == Postgres {
		b.w(expr, " = ANY(", b.arg(vals), ")")
		return
	}
	b.w(expr, " IN (")
	for i, v := range vals {
		if i > 0 {
			b.w(", ")
		}
		b.w(b.arg(v))
	}
	b.w(")")
}

// inRoles writes a condition on the role columns of contract_parties p.
func (b *builder) inRoles(roles []record.RoleRef) {
	if b.d == Postgres {
		cur := make([][]byte, len(roles))
		name := make([][]byte, len(roles))
		for i, r := range roles {
			cur[i] = append([]byte{}, r.Currency...)
			name[i] = append([]byte{}, r.Name...)
		}
		b.w("(p.role_currency, p.role_name) IN (SELECT * FROM unnest(",
			b.arg(cur), "::bytea[], ", b.arg(name), "::bytea[]))")
		return
	}
	b.w("(")
	for i, r := range roles {
		if i > 0 {
			b.w(" OR ")
		}
		b.w("(p.role_currency = ", b.arg(append([]byte{}, r.Currency...)),
			" AND p.role_name = ", b.arg(append([]byte{}, r.Name...)), ")")
	}
	b.w(")")
}

// hasContractConditions reports whether the filter restricts contracts:
// the records of no contract, other than the RolledBack markers, pass it.
func hasContractConditions(f *record.Filter) bool {
	return len(f.Contracts) > 0 || hasIndexConditions(f)
}

// hasIndexConditions reports whether the filter restricts contracts by
// their index entry.
func hasIndexConditions(f *record.Filter) bool {
	return len(f.RolesCurrency) > 0 || len(f.Tags) > 0 || len(f.PartyAddress) > 0 || len(f.PartyRole) > 0
}

// contractConditions writes the filter's conditions on the contract id
// column col, AND-ed: the listed contracts, and one semi-join per index
// field (roles currency, tags, parties), each a single index probe per
// record (history.Filter.Matches is the in-memory twin).
func (b *builder) contractConditions(f *record.Filter, col string) {
	and := false
	sep := func() {
		if and {
			b.w(" AND ")
		}
		and = true
	}
	if len(f.Contracts) > 0 {
		sep()
		ids := make([][]byte, len(f.Contracts))
		for i, r := range f.Contracts {
			ids[i] = RefBytes(r)
		}
		in(b, col, ids)
	}
	if len(f.RolesCurrency) > 0 {
		sep()
		cs := make([][]byte, len(f.RolesCurrency))
		for i, c := range f.RolesCurrency {
			cs[i] = append([]byte{}, c...)
		}
		b.w(col, " IN (SELECT c.contract_id FROM contracts c WHERE ")
		in(b, "c.roles_currency", cs)
		b.w(")")
	}
	if len(f.Tags) > 0 {
		sep()
		b.w(col, " IN (SELECT t.contract_id FROM contract_tags t WHERE ")
		in(b, "t.tag", f.Tags)
		b.w(")")
	}
	if len(f.PartyAddress) > 0 || len(f.PartyRole) > 0 {
		sep()
		b.w(col, " IN (SELECT p.contract_id FROM contract_parties p WHERE ")
		if len(f.PartyAddress) > 0 {
			in(b, "p.address", f.PartyAddress)
			if len(f.PartyRole) > 0 {
				b.w(" OR ")
			}
		}
		if len(f.PartyRole) > 0 {
			b.w("(p.address IS NULL AND ")
			b.inRoles(f.PartyRole)
			b.w(")")
		}
		b.w(")")
	}
}

// where writes the conditions on records r that do not involve contracts:
// the cursor, the upper bound, the snapshot and the kinds.
func (b *builder) where(p *record.RecordListParams) {
	b.w(" WHERE r.seq > ", b.arg(p.After))
	if p.UpTo != 0 {
		b.w(" AND r.seq <= ", b.arg(p.UpTo))
	}
	if p.Mode == record.ModeSnapshot {
		s := b.arg(p.Snapshot)
		b.w(" AND r.seq <= ", s, " AND r.kind <> 'rolled_back'")
		b.w(" AND (r.rolled_back_by IS NULL OR r.rolled_back_by > ", b.arg(p.Snapshot), ")")
	}
	if len(p.Filter.Kinds) > 0 {
		kinds := make([]string, len(p.Filter.Kinds))
		for i, k := range p.Filter.Kinds {
			kinds[i] = string(k)
		}
		b.w(" AND ")
		in(b, "r.kind", kinds)
	}
}

// CheckListParams refuses a mode RecordListQuery does not know.
func CheckListParams(p *record.RecordListParams) error {
	if p.Mode != record.ModeLog && p.Mode != record.ModeSnapshot {
		return fmt.Errorf("record list: unknown mode %d", p.Mode)
	}
	return nil
}

// ManyContracts is the number of matching contracts from which a filtered
// SQLite read scans the log in seq order instead of looking records up
// contract by contract (see RecordListQuery).
const ManyContracts = 64

// ContractCountQuery returns a statement counting the contracts that match
// the filter's contract conditions, up to ManyContracts+1, and false when
// the filter has no such conditions.
func ContractCountQuery(d Dialect, f *record.Filter) (string, []any, bool) {
	switch {
	case !hasContractConditions(f):
		return "", nil, false
	case !hasIndexConditions(f):
		return "SELECT " + strconv.Itoa(len(f.Contracts)), nil, true
	}
	b := &builder{d: d}
	b.w("SELECT count(*) FROM (SELECT 1 FROM contracts c0 WHERE ")
	b.contractConditions(f, "c0.contract_id")
	b.w(" LIMIT ", strconv.Itoa(ManyContracts+1), ") m")
	return b.sb.String(), b.args, true
}

// RecordListQuery returns the statement and arguments of a RecordList call:
// keyset pagination on seq (no OFFSET), the limit defaulted and capped.
//
// Without contract conditions it is one range scan of the records' primary
// key. With them there are two plans. By contract: the union of two
// ordered, limited parts, each on its own index: the records of the
// matching contracts (records (contract_id, seq)) and, in log mode when the
// kinds allow them, the RolledBack markers (their partial index), which
// pass every contract condition; good when few contracts match, as each
// page sorts their records after the cursor. By seq (scan, SQLite only): a
// range scan of the primary key that keeps the matching records and stops
// at the limit; good when many contracts match. PostgreSQL's planner makes
// that choice itself from its statistics; SQLite's is told by the caller
// (ContractCountQuery against ManyContracts).
func RecordListQuery(d Dialect, p *record.RecordListParams, scan bool) (string, []any) {
	b := &builder{d: d}
	limit := Limit(p.Limit)
	cols := RecordColumns
	markers := p.Mode == record.ModeLog &&
		(len(p.Filter.Kinds) == 0 || slices.Contains(p.Filter.Kinds, record.KindRolledBack))
	switch {
	case !hasContractConditions(&p.Filter):
		b.w("SELECT ", cols, " FROM records r")
		b.where(p)
	case scan && d == SQLite:
		b.w("SELECT ", cols, " FROM records r")
		b.where(p)
		b.w(" AND (")
		if markers {
			b.w("r.kind = 'rolled_back' OR ")
		}
		b.w("(r.kind <> 'rolled_back' AND ")
		// +r.contract_id keeps SQLite from looking records up by contract.
		b.contractConditions(&p.Filter, "+r.contract_id")
		b.w("))")
	default:
		if markers {
			b.w("SELECT ", cols, " FROM (")
		}
		b.w("SELECT ", cols, " FROM records r")
		b.where(p)
		b.w(" AND r.kind <> 'rolled_back' AND ")
		b.contractConditions(&p.Filter, "r.contract_id")
		if !markers {
			break
		}
		b.w(" ORDER BY r.seq LIMIT ", b.arg(limit))
		b.w(") a UNION ALL SELECT ", cols, " FROM (SELECT ", cols, " FROM records r")
		b.where(p)
		b.w(" AND r.kind = 'rolled_back' ORDER BY r.seq LIMIT ", b.arg(limit))
		b.w(") m ORDER BY seq LIMIT ", b.arg(limit))
		return b.sb.String(), b.args
	}
	b.w(" ORDER BY r.seq LIMIT ", b.arg(limit))
	return b.sb.String(), b.args
}
