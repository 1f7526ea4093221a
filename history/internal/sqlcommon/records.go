package sqlcommon

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history/record"
)

// RecordColumns are the records columns in the order of RecordRow.
const RecordColumns = "seq, kind, slot, block_no, block_hash, tx_id, tx_index, contract_id, payload, rolled_back_by"

// RecordRow is a history record as the columns of the records table.
type RecordRow struct {
	Seq          int64
	Kind         string
	Slot         int64
	BlockNo      int64
	BlockHash    []byte
	TxID         []byte
	TxIndex      int64
	ContractID   []byte // nil for records about no contract
	Payload      []byte
	RolledBackBy *int64
}

// nullPayload is what an empty payload is stored as.
var nullPayload = []byte("null")

// NewRecordRow validates and encodes a record. An empty payload is stored
// as JSON null; any other payload must be valid JSON and is stored verbatim.
// The payload is checked here unless the database checks it (d is
// Postgres: its json type refuses what is not JSON). RolledBackBy is not
// taken from the record: only rollback marks set it.
func NewRecordRow(d Dialect, r *record.Record) (RecordRow, error) {
	if _, err := record.ParseKind(string(r.Kind)); err != nil {
		return RecordRow{}, fmt.Errorf("record %d: %w", r.Seq, err)
	}
	h, err := NewHeaderRow(r.Block)
	if err != nil {
		return RecordRow{}, fmt.Errorf("record %d: %w", r.Seq, err)
	}
	if r.TxIndex < 0 || r.TxIndex > math.MaxInt32 {
		return RecordRow{}, fmt.Errorf("record %d: transaction index %d out of range", r.Seq, r.TxIndex)
	}
	payload := []byte(r.Payload)
	if len(payload) == 0 {
		payload = nullPayload
	} else if d != Postgres && !json.Valid(payload) {
		return RecordRow{}, fmt.Errorf("record %d: payload is not valid JSON", r.Seq)
	}
	row := RecordRow{
		Seq: r.Seq, Kind: string(r.Kind), Slot: h.Slot, BlockNo: h.BlockNo, BlockHash: h.Hash,
		TxID: HashBytes(r.TxID), TxIndex: int64(r.TxIndex), Payload: payload,
	}
	if r.Contract != nil {
		row.ContractID = RefBytes(*r.Contract)
	}
	return row, nil
}

// Dest returns the scan destinations for RecordColumns.
func (r *RecordRow) Dest() []any {
	return []any{&r.Seq, &r.Kind, &r.Slot, &r.BlockNo, &r.BlockHash, &r.TxID, &r.TxIndex,
		&r.ContractID, &r.Payload, &r.RolledBackBy}
}

// Record decodes the row.
func (r *RecordRow) Record() (record.Record, error) {
	rec := record.Record{
		Seq: r.Seq, Kind: internKind(r.Kind), TxIndex: int(r.TxIndex),
		Payload: json.RawMessage(r.Payload), RolledBackBy: r.RolledBackBy,
	}
	var err error
	if rec.Block, err = (HeaderRow{Slot: r.Slot, BlockNo: r.BlockNo, Hash: r.BlockHash}).Header(); err != nil {
		return rec, fmt.Errorf("record %d: %w", r.Seq, err)
	}
	if rec.TxID, err = HashFromBytes(r.TxID); err != nil {
		return rec, fmt.Errorf("record %d: transaction id: %w", r.Seq, err)
	}
	if rec.Contract, err = recordContract(r.Seq, r.ContractID); err != nil {
		return rec, err
	}
	return rec, nil
}

// recordContract decodes the contract id column of record seq: nil for
// NULL, a record about no contract.
func recordContract(seq int64, b []byte) (*chain.TxOutRef, error) {
	if b == nil {
		return nil, nil
	}
	id, err := RefFromBytes(b)
	if err != nil {
		return nil, fmt.Errorf("record %d: contract id: %w", seq, err)
	}
	return &id, nil
}

// internKind returns the shared constant for a known kind, so that a page of
// records does not hold a copy of the kind name per record.
func internKind(s string) record.Kind {
	for _, k := range record.Kinds {
		if string(k) == s {
			return k
		}
	}
	return record.Kind(s)
}

// ContractRow is a contract index entry as the columns of the contracts table.
type ContractRow struct {
	ContractID    []byte
	Version       string
	RolesCurrency []byte // empty (not NULL) for contracts without roles
	CreatedSeq    int64
	Block         HeaderRow
}

// ContractColumns are the contracts columns in the order of ContractRow.Dest.
const ContractColumns = "contract_id, version, roles_currency, created_seq, slot, block_no, block_hash"

// Dest returns the scan destinations for ContractColumns.
func (r *ContractRow) Dest() []any {
	return []any{&r.ContractID, &r.Version, &r.RolesCurrency, &r.CreatedSeq,
		&r.Block.Slot, &r.Block.BlockNo, &r.Block.Hash}
}

// Args returns the row as statement arguments in ContractColumns order.
func (r *ContractRow) Args() []any {
	return []any{r.ContractID, r.Version, r.RolesCurrency, r.CreatedSeq,
		r.Block.Slot, r.Block.BlockNo, r.Block.Hash}
}

// PartyRow is a contract party as the columns of the contract_parties table.
type PartyRow struct {
	ContractID   []byte
	Key          []byte
	Address      *string // nil for role parties
	RoleCurrency []byte  // nil for address parties
	RoleName     []byte  // nil for address parties
	AddedSeq     int64
}

// PartyColumns are the contract_parties columns in the order of PartyRow.
const PartyColumns = "contract_id, party_key, address, role_currency, role_name, added_seq"

// Args returns the row as statement arguments in PartyColumns order.
func (r *PartyRow) Args() []any {
	return []any{r.ContractID, r.Key, r.Address, r.RoleCurrency, r.RoleName, r.AddedSeq}
}

// newPartyRow encodes a party as given. A party with an address is an
// address party; its role columns, if any, are kept but filters do not
// match them (as history.Filter.Matches).
func newPartyRow(contract []byte, p record.Party, seq int64) PartyRow {
	row := PartyRow{ContractID: contract, Key: PartyKey(p), AddedSeq: seq}
	if p.Address != "" {
		a := p.Address
		row.Address = &a
	}
	if p.Address == "" || len(p.Role) > 0 || len(p.RoleCurrency) > 0 {
		row.RoleCurrency = append([]byte{}, p.RoleCurrency...)
		row.RoleName = append([]byte{}, p.Role...)
	}
	return row
}

// PartyFromColumns decodes a party read with the columns address,
// role_currency, role_name.
func PartyFromColumns(address *string, currency, role []byte) record.Party {
	var p record.Party
	if address != nil {
		p.Address = *address
	}
	p.RoleCurrency = NilIfEmpty(currency)
	p.Role = NilIfEmpty(role)
	return p
}

// ContractFromRow decodes a contract row with its tags and parties.
func ContractFromRow(r *ContractRow, tags []string, parties []record.Party) (*record.ContractIndex, error) {
	id, err := RefFromBytes(r.ContractID)
	if err != nil {
		return nil, err
	}
	block, err := r.Block.Header()
	if err != nil {
		return nil, err
	}
	return &record.ContractIndex{
		ID: id, Version: r.Version, RolesCurrency: NilIfEmpty(r.RolesCurrency),
		Tags: tags, Parties: parties, CreatedSeq: r.CreatedSeq, Block: block,
	}, nil
}

// TipRow is the stored node tip.
type TipRow struct {
	Slot    int64
	Hash    []byte
	BlockNo int64
}

// NewTipRow encodes a tip.
func NewTipRow(t chain.Tip) (TipRow, error) {
	h, err := NewHeaderRow(chain.BlockHeader{Slot: t.Point.Slot, BlockNo: t.BlockNo, Hash: t.Point.Hash})
	return TipRow{Slot: h.Slot, Hash: h.Hash, BlockNo: h.BlockNo}, err
}

// Tip decodes the row.
func (r TipRow) Tip() (chain.Tip, error) {
	h, err := (HeaderRow{Slot: r.Slot, BlockNo: r.BlockNo, Hash: r.Hash}).Header()
	return chain.Tip{Point: h.Point(), BlockNo: h.BlockNo}, err
}

// RecordRefColumns are the records columns of a history.RecordRef, in the
// order of RecordRefRow.Dest.
const RecordRefColumns = "seq, slot, kind, contract_id, rolled_back_by"

// RecordRefRow is the short form of a record as columns.
type RecordRefRow struct {
	Seq          int64
	Slot         int64
	Kind         string
	ContractID   []byte
	RolledBackBy *int64
}

// Dest returns the scan destinations for RecordRefColumns.
func (r *RecordRefRow) Dest() []any {
	return []any{&r.Seq, &r.Slot, &r.Kind, &r.ContractID, &r.RolledBackBy}
}

// Ref decodes the row.
func (r *RecordRefRow) Ref() (record.RecordRef, error) {
	ref := record.RecordRef{Seq: r.Seq, Kind: internKind(r.Kind), RolledBackBy: r.RolledBackBy}
	var err error
	if ref.Slot, err = Uint64("slot", r.Slot); err != nil {
		return ref, fmt.Errorf("record %d: %w", r.Seq, err)
	}
	if ref.Contract, err = recordContract(r.Seq, r.ContractID); err != nil {
		return ref, err
	}
	return ref, nil
}

// MarkStatement is the set-based statement of a rollback mark, with
// placeholders for the marker's seq (twice) and the point's slot: every
// record of a block after the point, below the marker and not yet rolled
// back, other than RolledBack markers (which belong to no block), is marked.
func MarkStatement(d Dialect) string {
	if d == Postgres {
		return `UPDATE records SET rolled_back_by = $1
			WHERE seq < $2 AND slot > $3 AND rolled_back_by IS NULL AND kind <> 'rolled_back'`
	}
	return `UPDATE records SET rolled_back_by = ?
			WHERE seq < ? AND slot > ? AND rolled_back_by IS NULL AND kind <> 'rolled_back'`
}
