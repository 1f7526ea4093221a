package query

import (
	"encoding/hex"
	"encoding/json"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// The JSON shapes of the API; /openapi.json describes each.

type contractHeaderJSON struct {
	ContractID    chain.TxOutRef    `json:"contractId"`
	RolesCurrency string            `json:"roleTokenMintingPolicyId"`
	Version       string            `json:"version"`
	Address       string            `json:"address"`
	Tags          json.RawMessage   `json:"tags"`
	Metadata      json.RawMessage   `json:"metadata"`
	Status        string            `json:"status"`
	Block         chain.BlockHeader `json:"block"`
	Seq           int64             `json:"seq"`
	Steps         int               `json:"steps"`
	LastSeq       int64             `json:"lastSeq"`
	LastBlock     chain.BlockHeader `json:"lastBlock"`
}

type contractJSON struct {
	contractHeaderJSON
	InitialContract json.RawMessage     `json:"initialContract"`
	InitialState    json.RawMessage     `json:"initialState"`
	CurrentContract json.RawMessage     `json:"currentContract"`
	State           json.RawMessage     `json:"state"`
	UTxO            *chain.TxOutRef     `json:"utxo"`
	Assets          record.Assets       `json:"assets"`
	Payouts         []payoutSummaryJSON `json:"payouts"`
	// SourceID is the contract source of its initial contract
	// (/sources/{sourceId}); null when its datum does not parse.
	SourceID *chain.Hash32 `json:"sourceId"`
}

type payoutSummaryJSON struct {
	PayoutID     chain.TxOutRef `json:"payoutId"`
	Role         *string        `json:"role,omitempty"`
	Address      *string        `json:"address,omitempty"`
	Assets       record.Assets  `json:"assets"`
	Status       string         `json:"status"`
	WithdrawalID *chain.Hash32  `json:"withdrawalId"`
}

func contractHeaderOf(c *contractstore.Contract) contractHeaderJSON {
	return contractHeaderJSON{
		ContractID: c.ID, RolesCurrency: hex.EncodeToString(c.RolesCurrency), Version: c.Version, Address: c.Address,
		Tags: api.RawOr(c.Tags, "{}"), Metadata: api.RawOr(c.Metadata, "{}"), Status: string(c.Status), Block: c.Block, Seq: c.Seq,
		Steps: c.Steps, LastSeq: c.LastSeq, LastBlock: c.LastBlock,
	}
}

func contractOf(c *contractstore.Contract) contractJSON {
	out := contractJSON{contractHeaderJSON: contractHeaderOf(c), Payouts: []payoutSummaryJSON{}}
	b := c.Body
	if b == nil {
		b = &contractstore.ContractBody{}
	}
	out.InitialContract, out.InitialState = api.RawOr(b.InitialContract, "null"), api.RawOr(b.InitialState, "null")
	out.CurrentContract, out.State, out.UTxO = api.RawOr(b.Contract, "null"), api.RawOr(b.State, "null"), b.UTxO
	out.Assets, out.SourceID = api.Assets(b.Assets), b.SourceID
	for _, p := range b.Payouts {
		out.Payouts = append(out.Payouts, payoutSummaryJSON{PayoutID: p.ID, Role: p.Role, Address: p.Address,
			Assets: api.Assets(p.Assets), Status: string(p.Status), WithdrawalID: p.Withdrawal})
	}
	return out
}

type transactionHeaderJSON struct {
	ContractID    chain.TxOutRef    `json:"contractId"`
	TransactionID chain.Hash32      `json:"transactionId"`
	Seq           int64             `json:"seq"`
	Block         chain.BlockHeader `json:"block"`
	Kind          string            `json:"kind"`
	InputUTxO     chain.TxOutRef    `json:"inputUtxo"`
	OutputUTxO    *chain.TxOutRef   `json:"outputUtxo"`
	Closed        bool              `json:"closed"`
	Reason        *string           `json:"reason,omitempty"`
}

type transactionJSON struct {
	transactionHeaderJSON
	// Details is the history record's payload: inputs, interval, output,
	// payouts, tags and metadata of an applied step; the reason of a
	// rejected one.
	Details json.RawMessage `json:"details"`
}

func transactionOf(t *contractstore.Transaction) transactionJSON {
	return transactionJSON{transactionHeaderJSON: transactionHeaderOf(t), Details: api.RawOr(t.Payload, "null")}
}

func transactionHeaderOf(t *contractstore.Transaction) transactionHeaderJSON {
	out := transactionHeaderJSON{ContractID: t.ContractID, TransactionID: t.TxID, Seq: t.Seq, Block: t.Block,
		Kind: string(t.Kind), InputUTxO: t.Input, OutputUTxO: t.Output, Closed: t.Closed}
	if t.Kind == contractstore.TxRejected {
		reason := t.Reason
		out.Reason = &reason
	}
	return out
}

type withdrawalRefJSON struct {
	WithdrawalID chain.Hash32      `json:"withdrawalId"`
	Seq          int64             `json:"seq"`
	Block        chain.BlockHeader `json:"block"`
}

type payoutJSON struct {
	PayoutID      chain.TxOutRef     `json:"payoutId"`
	ContractID    chain.TxOutRef     `json:"contractId"`
	TransactionID chain.Hash32       `json:"transactionId"`
	Seq           int64              `json:"seq"`
	Block         chain.BlockHeader  `json:"block"`
	RolesCurrency string             `json:"roleTokenMintingPolicyId"`
	Role          *string            `json:"role,omitempty"`
	Address       *string            `json:"address,omitempty"`
	Assets        record.Assets      `json:"assets"`
	Status        string             `json:"status"`
	Withdrawal    *withdrawalRefJSON `json:"withdrawal"`
}

func payoutOf(p *contractstore.Payout) payoutJSON {
	out := payoutJSON{PayoutID: p.ID, ContractID: p.ContractID, TransactionID: p.TxID, Seq: p.Seq, Block: p.Block,
		RolesCurrency: hex.EncodeToString(p.RolesCurrency), Role: p.Role, Address: p.Address, Assets: api.Assets(p.Assets),
		Status: string(p.Status)}
	if w := p.Withdrawal; w != nil {
		out.Withdrawal = &withdrawalRefJSON{WithdrawalID: w.TxID, Seq: w.Seq, Block: w.Block}
	}
	return out
}

type withdrawalJSON struct {
	WithdrawalID chain.Hash32      `json:"withdrawalId"`
	Seq          int64             `json:"seq"`
	Block        chain.BlockHeader `json:"block"`
	Payouts      []payoutJSON      `json:"payouts"`
}

func withdrawalOf(w *contractstore.Withdrawal) withdrawalJSON {
	out := withdrawalJSON{WithdrawalID: w.TxID, Seq: w.Seq, Block: w.Block, Payouts: []payoutJSON{}}
	for i := range w.Payouts {
		out.Payouts = append(out.Payouts, payoutOf(&w.Payouts[i]))
	}
	return out
}
