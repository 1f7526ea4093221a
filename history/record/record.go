package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// Kind is the kind of a history record.
type Kind string

// Record kinds.
const (
	KindContractCreated     Kind = "contract_created"
	KindInputsApplied       Kind = "inputs_applied"
	KindPayoutWithdrawn     Kind = "payout_withdrawn"
	KindApplyInputsRejected Kind = "apply_inputs_rejected"
	KindRolledBack          Kind = "rolled_back"
)

// Kinds lists every kind.
var Kinds = []Kind{KindContractCreated, KindInputsApplied, KindPayoutWithdrawn, KindApplyInputsRejected, KindRolledBack}

// ParseKind checks a kind name.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("unknown record kind %q", s)
}

// Record is one entry of the history log.
type Record struct {
	// Seq is the record's position in the log: strictly increasing, no gaps.
	Seq   int64             `json:"seq"`
	Kind  Kind              `json:"kind"`
	Block chain.BlockHeader `json:"block"`
	// TxID and TxIndex place the record in its block. A RolledBack record
	// has neither (zero here, left out of its JSON).
	TxID    chain.Hash32 `json:"txId"`
	TxIndex int          `json:"txIndex"`
	// Contract is the contract the record is about; nil for RolledBack.
	Contract *chain.TxOutRef `json:"contractId,omitempty"`
	// Payload holds the kind's details as JSON (Marlowe values in core JSON).
	Payload json.RawMessage `json:"payload"`
	// RolledBackBy is the seq of the RolledBack record that undid this one.
	RolledBackBy *int64 `json:"rolledBackBy,omitempty"`
}

// MarshalJSON writes the record; a RolledBack record, which is about no
// transaction, without txId and txIndex.
func (r Record) MarshalJSON() ([]byte, error) {
	type plain Record // the fields, without this method
	var v any = plain(r)
	if r.Kind == KindRolledBack {
		v = struct {
			Seq          int64             `json:"seq"`
			Kind         Kind              `json:"kind"`
			Block        chain.BlockHeader `json:"block"`
			Contract     *chain.TxOutRef   `json:"contractId,omitempty"`
			Payload      json.RawMessage   `json:"payload"`
			RolledBackBy *int64            `json:"rolledBackBy,omitempty"`
		}{r.Seq, r.Kind, r.Block, r.Contract, r.Payload, r.RolledBackBy}
	}
	// The caller's encoder escapes HTML or not; this one leaves the payload
	// as it is.
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Current reports whether the record was not rolled back as of seq s:
// the state of the log after its first s records.
func (r *Record) Current(s int64) bool { return r.RolledBackBy == nil || *r.RolledBackBy > s }

// Sentinel errors of the storage layer.
var (
	ErrNotFound        = errors.New("not found")
	ErrSchemaTooNew    = errors.New("the database schema is newer than this binary")
	ErrWrongNetwork    = errors.New("the database was filled from another network")
	ErrSeqMismatch     = errors.New("records do not continue the log")
	ErrBackendClosed   = errors.New("storage backend closed")
	ErrNoIntersection  = errors.New("no stored point is on the node's chain")
	ErrRollbackTooDeep = errors.New("rollback deeper than the stored history")
	// ErrFenced refuses a write of a process whose writer epoch is not the
	// stored one: another process took the writer lease since (this one
	// lost it), so nothing it writes may land. It is fatal.
	ErrFenced = errors.New("this process lost the writer lease: another writer took over")
)
