package cvsql

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/history/storage"
)

// Rows is what a query returns: pgx.Rows, or *sql.Rows through
// storage.SQLRows.
type Rows = storage.Rows

// Querier runs read statements: a pool, or a read transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (Rows, error)
}

// Stmt is one statement of a commit. Want, when not negative, is the
// number of rows it must affect (else the commit fails with
// contractstore.ErrConflict).
type Stmt struct {
	SQL  string
	Args []any
	Want int64
}

// RefBytes encodes an output reference as 36 bytes: the transaction id,
// then the index big-endian, so byte order is ledger order.
func RefBytes(r chain.TxOutRef) []byte {
	b := make([]byte, 36)
	copy(b, r.TxID[:])
	binary.BigEndian.PutUint32(b[32:], r.Index)
	return b
}

// RefFrom decodes RefBytes.
func RefFrom(b []byte) (chain.TxOutRef, error) {
	if len(b) != 36 {
		return chain.TxOutRef{}, fmt.Errorf("stored output reference of %d bytes", len(b))
	}
	var r chain.TxOutRef
	copy(r.TxID[:], b)
	r.Index = binary.BigEndian.Uint32(b[32:])
	return r, nil
}

// HashFrom decodes a stored hash (empty for the origin).
func HashFrom(b []byte) (chain.Hash32, error) {
	var h chain.Hash32
	if len(b) != 0 && len(b) != 32 {
		return h, fmt.Errorf("stored hash of %d bytes", len(b))
	}
	copy(h[:], b)
	return h, nil
}

// decoded decodes a row's stored references, hashes and blocks, keeping
// the first error: a row is checked once, after all its columns.
type decoded struct{ err error }

func (d *decoded) ref(b []byte) chain.TxOutRef {
	r, err := RefFrom(b)
	d.keep(err)
	return r
}

func (d *decoded) hash(b []byte) chain.Hash32 {
	h, err := HashFrom(b)
	d.keep(err)
	return h
}

func (d *decoded) block(b *blockScan) chain.BlockHeader {
	h, err := b.header()
	d.keep(err)
	return h
}

func (d *decoded) keep(err error) {
	if d.err == nil {
		d.err = err
	}
}

// NonNil returns b, or an empty non-nil slice: drivers store a nil slice
// as NULL.
func NonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// jsonText returns JSON as text for a json (PostgreSQL) or TEXT (SQLite)
// column, "null" for none.
func jsonText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	return string(raw)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only plain structs of this package are marshalled here.
		panic(fmt.Sprintf("cvsql: marshalling %T: %v", v, err))
	}
	return string(b)
}

// blockScan reads the four columns of a block header, NULL-tolerant.
type blockScan struct {
	slot, no *int64
	hash     []byte
}

func (b *blockScan) dest() []any { return []any{&b.slot, &b.no, &b.hash} }

func (b *blockScan) header() (chain.BlockHeader, error) {
	h, err := HashFrom(b.hash)
	var out chain.BlockHeader
	if b.slot != nil {
		out.Slot = uint64(*b.slot)
	}
	if b.no != nil {
		out.BlockNo = uint64(*b.no)
	}
	out.Hash = h
	return out, err
}

func blockArgs(h chain.BlockHeader) []any {
	return []any{int64(h.Slot), int64(h.BlockNo), NonNil(append([]byte(nil), h.Hash[:]...))}
}

// HeadCols are the cursor row's columns.
const HeadCols = "k.seq, k.slot, k.block_no, k.block_hash, k.contracts, k.open_contracts"

type headScan struct {
	seq, contracts, open int64
	block                blockScan
}

func (h *headScan) dest() []any {
	return append([]any{&h.seq}, append(h.block.dest(), &h.contracts, &h.open)...)
}

func (h *headScan) head() (contractstore.Head, error) {
	b, err := h.block.header()
	return contractstore.Head{Position: contractstore.Position{Seq: h.seq, Block: b}, Contracts: h.contracts, OpenContracts: h.open}, err
}

// contractCols are a contract's header columns; the body follows them when asked.
const contractCols = "c.contract_id, c.created_seq, c.slot, c.block_no, c.block_hash, c.version, c.roles_currency, " +
	"c.address, c.tags, c.metadata, c.status, c.steps, c.last_seq, c.last_slot, c.last_block_no, c.last_block_hash"

type contractScan struct {
	id, rc, tags, meta, body []byte
	seq, steps, lastSeq      *int64
	version, address, status *string
	block, last              blockScan
}

func (c *contractScan) dest(withBody bool) []any {
	d := []any{&c.id, &c.seq}
	d = append(d, c.block.dest()...)
	d = append(d, &c.version, &c.rc, &c.address, &c.tags, &c.meta, &c.status, &c.steps, &c.lastSeq)
	d = append(d, c.last.dest()...)
	if withBody {
		d = append(d, &c.body)
	}
	return d
}

func (c *contractScan) contract() (*contractstore.Contract, error) {
	if c.id == nil {
		return nil, nil
	}
	var d decoded
	id := d.ref(c.id)
	out := &contractstore.Contract{ID: id, RolesCurrency: NonNil(c.rc), Tags: c.tags, Metadata: c.meta,
		Block: d.block(&c.block), LastBlock: d.block(&c.last)}
	if d.err != nil {
		return nil, d.err
	}
	out.Seq, out.Steps, out.LastSeq = deref(c.seq), int(deref(c.steps)), deref(c.lastSeq)
	out.Version, out.Address, out.Status = derefS(c.version), derefS(c.address), contractstore.Status(derefS(c.status))
	if c.body != nil {
		out.Body = &contractstore.ContractBody{}
		if err := json.Unmarshal(c.body, out.Body); err != nil {
			return nil, fmt.Errorf("contract %s: stored body: %w", id, err)
		}
	}
	return out, nil
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func derefS(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// txCols are a transaction's columns; the payload follows them when asked.
const txCols = "t.contract_id, t.tx_id, t.seq, t.slot, t.block_no, t.block_hash, t.kind, t.input, t.output, t.closed, t.reason"

type txScan struct {
	contract, txID, input, output, payload []byte
	seq                                    *int64
	kind, reason                           *string
	closed                                 *bool
	block                                  blockScan
}

func (t *txScan) dest(withPayload bool) []any {
	d := []any{&t.contract, &t.txID, &t.seq}
	d = append(d, t.block.dest()...)
	d = append(d, &t.kind, &t.input, &t.output, &t.closed, &t.reason)
	if withPayload {
		d = append(d, &t.payload)
	}
	return d
}

func (t *txScan) transaction() (*contractstore.Transaction, error) {
	if t.contract == nil {
		return nil, nil
	}
	var d decoded
	out := contractstore.Transaction{ContractID: d.ref(t.contract), TxID: d.hash(t.txID), Input: d.ref(t.input), Block: d.block(&t.block)}
	if t.output != nil {
		o := d.ref(t.output)
		out.Output = &o
	}
	if d.err != nil {
		return nil, d.err
	}
	out.Seq, out.Kind, out.Reason = deref(t.seq), contractstore.TransactionKind(derefS(t.kind)), derefS(t.reason)
	out.Closed = t.closed != nil && *t.closed
	out.Payload = t.payload
	return &out, nil
}

// payoutCols are a payout's columns.
const payoutCols = "p.payout_id, p.contract_id, p.tx_id, p.seq, p.slot, p.block_no, p.block_hash, p.roles_currency, " +
	"p.role, p.address, p.assets, p.status, p.withdrawal_tx, p.withdrawal_seq, p.withdrawal_slot, p.withdrawal_block_no, p.withdrawal_block_hash, " +
	"p.validator_address"

type payoutScan struct {
	id, contract, txID, rc, assets, wTx, role []byte
	seq, wSeq                                 *int64
	address, status, validator                *string
	block, wBlock                             blockScan
}

func (p *payoutScan) dest() []any {
	d := []any{&p.id, &p.contract, &p.txID, &p.seq}
	d = append(d, p.block.dest()...)
	d = append(d, &p.rc, &p.role, &p.address, &p.assets, &p.status, &p.wTx, &p.wSeq)
	d = append(d, p.wBlock.dest()...)
	return append(d, &p.validator)
}

func (p *payoutScan) payout() (*contractstore.Payout, error) {
	if p.id == nil {
		return nil, nil
	}
	var d decoded
	out := contractstore.Payout{ID: d.ref(p.id), ContractID: d.ref(p.contract), TxID: d.hash(p.txID), Block: d.block(&p.block)}
	if p.wTx != nil {
		out.Withdrawal = &contractstore.WithdrawalRef{Seq: deref(p.wSeq), TxID: d.hash(p.wTx), Block: d.block(&p.wBlock)}
	}
	if d.err != nil {
		return nil, d.err
	}
	out.Seq, out.RolesCurrency, out.Status = deref(p.seq), NonNil(p.rc), contractstore.PayoutStatus(derefS(p.status))
	out.ValidatorAddress = derefS(p.validator)
	// A payout goes to an address or to a role (whose name may be empty,
	// which drivers read back as a nil slice).
	out.Address = p.address
	if p.address == nil {
		r := marlowe.NameText(p.role)
		out.Role = &r
	}
	if err := json.Unmarshal(p.assets, &out.Assets); err != nil {
		return nil, fmt.Errorf("payout %s: stored assets: %w", out.ID, err)
	}
	return &out, nil
}

// emptyAssets is the value of nothing.
var emptyAssets = record.Assets{Tokens: map[string]map[string]json.Number{}}
