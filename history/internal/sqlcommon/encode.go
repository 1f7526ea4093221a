// Package sqlcommon holds what the SQL backends of the history log share:
// how chain values are laid out in columns, how a commit is validated and
// turned into rows, how the tracked UTxO steps of a commit reduce to a set
// of row changes, how a record filter becomes SQL, and how the embedded
// migrations are read. It talks to no database itself: history/pgstore and
// history/sqlitestore run the statements.
package sqlcommon

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/history/record"
)

// RefLen is the length of an encoded output reference: the transaction id
// followed by the output index as four big-endian bytes, so that byte order
// is the ledger's order (chain.TxOutRef.Compare).
const RefLen = 36

// RefBytes encodes an output reference for a key column.
func RefBytes(r chain.TxOutRef) []byte {
	b := make([]byte, RefLen)
	copy(b, r.TxID[:])
	binary.BigEndian.PutUint32(b[32:], r.Index)
	return b
}

// RefFromBytes decodes a key column written by RefBytes.
func RefFromBytes(b []byte) (chain.TxOutRef, error) {
	var r chain.TxOutRef
	if len(b) != RefLen {
		return r, fmt.Errorf("output reference column has %d bytes, want %d", len(b), RefLen)
	}
	copy(r.TxID[:], b)
	r.Index = binary.BigEndian.Uint32(b[32:])
	return r, nil
}

// HashFromBytes decodes a hash column; an empty column is the zero hash.
func HashFromBytes(b []byte) (chain.Hash32, error) {
	var h chain.Hash32
	switch len(b) {
	case 0:
	case len(h):
		copy(h[:], b)
	default:
		return h, fmt.Errorf("hash column has %d bytes, want %d", len(b), len(h))
	}
	return h, nil
}

// HashBytes encodes a hash for a column; the zero hash is stored as is.
func HashBytes(h chain.Hash32) []byte { return append([]byte(nil), h[:]...) }

// Int64 converts a slot or block number to its column type.
func Int64(what string, v uint64) (int64, error) {
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("%s %d does not fit a signed 64-bit column", what, v)
	}
	return int64(v), nil
}

// Uint64 converts a slot or block number column back.
func Uint64(what string, v int64) (uint64, error) {
	if v < 0 {
		return 0, fmt.Errorf("%s column holds %d", what, v)
	}
	return uint64(v), nil
}

// HeaderRow is a block header as columns (slot, block number, hash).
type HeaderRow struct {
	Slot    int64
	BlockNo int64
	Hash    []byte
}

// NewHeaderRow encodes a block header.
func NewHeaderRow(h chain.BlockHeader) (HeaderRow, error) {
	slot, err := Int64("slot", h.Slot)
	if err != nil {
		return HeaderRow{}, err
	}
	no, err := Int64("block number", h.BlockNo)
	if err != nil {
		return HeaderRow{}, err
	}
	return HeaderRow{Slot: slot, BlockNo: no, Hash: HashBytes(h.Hash)}, nil
}

// Header decodes the columns.
func (r HeaderRow) Header() (chain.BlockHeader, error) {
	var h chain.BlockHeader
	var err error
	if h.Slot, err = Uint64("slot", r.Slot); err != nil {
		return h, err
	}
	if h.BlockNo, err = Uint64("block number", r.BlockNo); err != nil {
		return h, err
	}
	h.Hash, err = HashFromBytes(r.Hash)
	return h, err
}

// NilIfEmpty returns nil for an empty slice, so that an empty byte string is
// stored as NULL and read back as nil on every backend.
func NilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// PartyKey is the primary-key part of a contract party: it tells address
// parties and role parties apart and is unique per party.
func PartyKey(p record.Party) []byte {
	k := make([]byte, 0, 3*binary.MaxVarintLen16+len(p.Address)+len(p.RoleCurrency)+len(p.Role))
	k = binary.AppendUvarint(k, uint64(len(p.Address)))
	k = append(k, p.Address...)
	k = binary.AppendUvarint(k, uint64(len(p.RoleCurrency)))
	k = append(k, p.RoleCurrency...)
	k = binary.AppendUvarint(k, uint64(len(p.Role)))
	return append(k, p.Role...)
}

// hexBytes is a byte string written as hex in the stored UTxO lists.
type hexBytes []byte

func (b hexBytes) MarshalText() ([]byte, error) {
	out := make([]byte, hex.EncodedLen(len(b)))
	hex.Encode(out, b)
	return out, nil
}

func (b *hexBytes) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*b = nil
		return nil
	}
	v := make([]byte, hex.DecodedLen(len(text)))
	if _, err := hex.Decode(v, text); err != nil {
		return err
	}
	*b = v
	return nil
}

// storedUTxO is the stored JSON form of a classify.TrackedUTxO. It is the
// on-disk format of utxo_changes: change it only with a migration.
type storedUTxO struct {
	Ref           chain.TxOutRef    `json:"ref"`
	Kind          classify.UTxOKind `json:"kind"`
	ContractID    chain.TxOutRef    `json:"contractId"`
	Version       string            `json:"version"`
	Address       hexBytes          `json:"address"`
	RolesCurrency hexBytes          `json:"rolesCurrency,omitempty"`
	Role          hexBytes          `json:"role,omitempty"`
	Datum         hexBytes          `json:"datum,omitempty"`
}

// UTxOListJSON encodes a list of tracked outputs for a utxo_changes column.
func UTxOListJSON(us []classify.TrackedUTxO) ([]byte, error) {
	out := make([]storedUTxO, len(us))
	for i, u := range us {
		out[i] = storedUTxO{
			Ref: u.Ref, Kind: u.Kind, ContractID: u.ContractID, Version: u.Version,
			Address: u.Address, RolesCurrency: u.RolesCurrency, Role: u.Role, Datum: u.Datum,
		}
	}
	return json.Marshal(out)
}

// UTxOListFromJSON decodes a utxo_changes column.
func UTxOListFromJSON(b []byte) ([]classify.TrackedUTxO, error) {
	var in []storedUTxO
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("stored UTxO list: %w", err)
	}
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]classify.TrackedUTxO, len(in))
	for i, u := range in {
		out[i] = classify.TrackedUTxO{
			Ref: u.Ref, Kind: u.Kind, ContractID: u.ContractID, Version: u.Version,
			Address:       NilIfEmpty(u.Address),
			RolesCurrency: NilIfEmpty(u.RolesCurrency),
			Role:          NilIfEmpty(u.Role),
			Datum:         NilIfEmpty(u.Datum),
		}
	}
	return out, nil
}

// UTxORow is a tracked output as the columns of the utxos table.
type UTxORow struct {
	Ref           []byte
	Kind          int64
	ContractID    []byte
	Version       string
	Address       []byte
	RolesCurrency []byte // nil when empty
	Role          []byte // nil when empty
	Datum         []byte // nil when empty
}

// NewUTxORow encodes a tracked output.
func NewUTxORow(u classify.TrackedUTxO) UTxORow {
	return UTxORow{
		Ref: RefBytes(u.Ref), Kind: int64(u.Kind), ContractID: RefBytes(u.ContractID),
		Version: u.Version, Address: append([]byte{}, u.Address...),
		RolesCurrency: NilIfEmpty(u.RolesCurrency), Role: NilIfEmpty(u.Role), Datum: NilIfEmpty(u.Datum),
	}
}

// UTxOColumns are the utxos columns in the order of UTxORow.
const UTxOColumns = "ref, kind, contract_id, version, address, roles_currency, role, datum"

// Dest returns the scan destinations for UTxOColumns.
func (r *UTxORow) Dest() []any {
	return []any{&r.Ref, &r.Kind, &r.ContractID, &r.Version, &r.Address, &r.RolesCurrency, &r.Role, &r.Datum}
}

// Args returns the row as statement arguments in UTxOColumns order.
func (r *UTxORow) Args() []any {
	return []any{r.Ref, r.Kind, r.ContractID, r.Version, r.Address, r.RolesCurrency, r.Role, r.Datum}
}

// UTxO decodes the row.
func (r *UTxORow) UTxO() (classify.TrackedUTxO, error) {
	ref, err := RefFromBytes(r.Ref)
	if err != nil {
		return classify.TrackedUTxO{}, err
	}
	cid, err := RefFromBytes(r.ContractID)
	if err != nil {
		return classify.TrackedUTxO{}, err
	}
	if r.Kind < 0 || r.Kind > math.MaxUint8 {
		return classify.TrackedUTxO{}, fmt.Errorf("utxo kind column holds %d", r.Kind)
	}
	return classify.TrackedUTxO{
		Ref: ref, Kind: classify.UTxOKind(r.Kind), ContractID: cid, Version: r.Version,
		Address:       NilIfEmpty(r.Address),
		RolesCurrency: NilIfEmpty(r.RolesCurrency),
		Role:          NilIfEmpty(r.Role),
		Datum:         NilIfEmpty(r.Datum),
	}, nil
}
