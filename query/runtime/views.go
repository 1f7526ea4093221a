package runtime

import (
	"encoding/hex"
	"encoding/json"
	"net/url"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// The resources of the runtime view, as the Marlowe Runtime 1.0.0 shows
// them; the fields after "the follower's" are extras under names the
// Runtime does not use.

// languageVersion is the Marlowe language version (the Runtime's "version"): all
// five script versions run Marlowe Core V1.
const languageVersion = "v1"

// confirmed is every transaction's status: a follower sees only
// transactions on chain.
const confirmed = "confirmed"

// Links are relative to the API root, as the Runtime writes them.
func linkContract(id chain.TxOutRef) string { return "contracts/" + url.PathEscape(id.String()) }

func linkTransactions(id chain.TxOutRef) string { return linkContract(id) + "/transactions" }

func linkTransaction(id chain.TxOutRef, tx chain.Hash32) string {
	return linkTransactions(id) + "/" + tx.String()
}

func linkPayout(id chain.TxOutRef) string { return "payouts/" + url.PathEscape(id.String()) }

func linkWithdrawal(tx chain.Hash32) string { return "withdrawals/" + tx.String() }

type contractHeaderJSON struct {
	ContractID    chain.TxOutRef  `json:"contractId"`
	RolesCurrency string          `json:"roleTokenMintingPolicyId"`
	Version       string          `json:"version"`
	Tags          json.RawMessage `json:"tags"`
	Metadata      json.RawMessage `json:"metadata"`
	Status        string          `json:"status"`
	Block         blockJSON       `json:"block"`
	// The follower's.
	ScriptVersion  string    `json:"scriptVersion"`
	ContractStatus string    `json:"contractStatus"`
	Address        string    `json:"address"`
	Seq            int64     `json:"seq"`
	Steps          int       `json:"steps"`
	LastSeq        int64     `json:"lastSeq"`
	LastBlock      blockJSON `json:"lastBlock"`
}

func contractHeaderOf(c *contractstore.Contract) contractHeaderJSON {
	return contractHeaderJSON{
		ContractID: c.ID, RolesCurrency: hex.EncodeToString(c.RolesCurrency), Version: languageVersion,
		Tags: api.RawOr(c.Tags, "{}"), Metadata: api.RawOr(c.Metadata, "{}"), Status: confirmed, Block: blockOf(c.Block),
		ScriptVersion: c.Version, ContractStatus: string(c.Status), Address: c.Address, Seq: c.Seq, Steps: c.Steps,
		LastSeq: c.LastSeq, LastBlock: blockOf(c.LastBlock),
	}
}

type contractLinks struct {
	Contract     string `json:"contract"`
	Transactions string `json:"transactions"`
}

type contractStateJSON struct {
	contractHeaderJSON
	InitialContract  json.RawMessage `json:"initialContract"`
	InitialState     json.RawMessage `json:"initialState"`
	CurrentContract  json.RawMessage `json:"currentContract,omitempty"` // absent once closed
	State            json.RawMessage `json:"state,omitempty"`
	UTxO             *chain.TxOutRef `json:"utxo,omitempty"`
	Assets           record.Assets   `json:"assets"`
	UnclaimedPayouts []payoutJSON    `json:"unclaimedPayouts"`
	// The follower's: the contract source of its initial contract.
	SourceID *chain.Hash32 `json:"sourceId,omitempty"`
}

type transactionsLink struct {
	Transactions string `json:"transactions"`
}

func contractStateOf(c *contractstore.Contract) contractStateJSON {
	out := contractStateJSON{contractHeaderJSON: contractHeaderOf(c), UnclaimedPayouts: []payoutJSON{}}
	b := c.Body
	if b == nil {
		b = &contractstore.ContractBody{}
	}
	out.InitialContract, out.InitialState = api.RawOr(b.InitialContract, "null"), api.RawOr(b.InitialState, "null")
	out.CurrentContract, out.State, out.UTxO = nonNull(b.Contract), nonNull(b.State), b.UTxO
	out.Assets, out.SourceID = api.Assets(b.Assets), b.SourceID
	for _, p := range b.Payouts {
		if p.Role != nil && p.Status == contractstore.PayoutAvailable {
			out.UnclaimedPayouts = append(out.UnclaimedPayouts, payoutJSON{PayoutID: p.ID, Role: *p.Role, Assets: api.Assets(p.Assets)})
		}
	}
	return out
}

type txHeaderJSON struct {
	ContractID    chain.TxOutRef  `json:"contractId"`
	TransactionID chain.Hash32    `json:"transactionId"`
	Tags          json.RawMessage `json:"tags"`
	Metadata      json.RawMessage `json:"metadata"`
	Status        string          `json:"status"`
	Block         blockJSON       `json:"block"`
	UTxO          *chain.TxOutRef `json:"utxo,omitempty"`
	// The follower's.
	Seq int64 `json:"seq"`
}

type transactionLink struct {
	Transaction string `json:"transaction"`
}

// stepPayload is the part of an inputs_applied payload the view reads.
type stepPayload struct {
	Inputs   json.RawMessage            `json:"inputs"`
	Interval record.Interval            `json:"interval"`
	Output   *record.ContractOutput     `json:"output"`
	Payouts  []record.Payout            `json:"payouts"`
	Tags     map[string]json.RawMessage `json:"tags"`
	Metadata map[string]json.RawMessage `json:"metadata"`
}

// nonNull is raw, or nothing (an absent field) for null.
func nonNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

func objectOf(m map[string]json.RawMessage) json.RawMessage {
	if len(m) == 0 {
		return json.RawMessage("{}")
	}
	b, err := json.Marshal(m)
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}

func txHeaderOf(t *contractstore.Transaction, p *stepPayload) txHeaderJSON {
	return txHeaderJSON{ContractID: t.ContractID, TransactionID: t.TxID, Tags: objectOf(p.Tags), Metadata: objectOf(p.Metadata),
		Status: confirmed, Block: blockOf(t.Block), UTxO: t.Output, Seq: t.Seq}
}

type payoutJSON struct {
	PayoutID chain.TxOutRef `json:"payoutId"`
	Role     string         `json:"role"`
	Assets   record.Assets  `json:"assets"`
}

type txJSON struct {
	txHeaderJSON
	InputUTxO                   chain.TxOutRef  `json:"inputUtxo"`
	InputContract               json.RawMessage `json:"inputContract"`
	InputState                  json.RawMessage `json:"inputState"`
	Inputs                      json.RawMessage `json:"inputs"`
	OutputUTxO                  *chain.TxOutRef `json:"outputUtxo,omitempty"` // absent when the step closed the contract
	OutputContract              json.RawMessage `json:"outputContract,omitempty"`
	OutputState                 json.RawMessage `json:"outputState,omitempty"`
	ConsumingTx                 *chain.Hash32   `json:"consumingTx,omitempty"`
	InvalidBefore               string          `json:"invalidBefore"`
	InvalidHereafter            string          `json:"invalidHereafter"`
	Assets                      record.Assets   `json:"assets"`
	Payouts                     []payoutJSON    `json:"payouts"`
	ReconstructedSemanticInput  json.RawMessage `json:"reconstructedSemanticInput"`
	ReconstructedSemanticOutput json.RawMessage `json:"reconstructedSemanticOutput"`
	// The follower's: the interval as the semantics see it (POSIX ms, both
	// ends inclusive) and as the ledger has it (slots).
	Interval record.Interval `json:"interval"`
}

type txLinks struct {
	Previous string `json:"previous,omitempty"`
	Next     string `json:"next,omitempty"`
}

type assetIDJSON struct {
	PolicyID  string `json:"policyId"`
	AssetName string `json:"assetName"`
}

type payoutHeaderJSON struct {
	ContractID   chain.TxOutRef `json:"contractId"`
	PayoutID     chain.TxOutRef `json:"payoutId"`
	Role         assetIDJSON    `json:"role"`
	Status       string         `json:"status"`
	WithdrawalID *chain.Hash32  `json:"withdrawalId,omitempty"`
	// The follower's.
	Assets        record.Assets `json:"assets"`
	TransactionID chain.Hash32  `json:"transactionId"`
	Seq           int64         `json:"seq"`
	Block         blockJSON     `json:"block"`
}

func payoutHeaderOf(p *contractstore.Payout) payoutHeaderJSON {
	out := payoutHeaderJSON{ContractID: p.ContractID, PayoutID: p.ID, Status: string(p.Status), Assets: api.Assets(p.Assets),
		TransactionID: p.TxID, Seq: p.Seq, Block: blockOf(p.Block),
		Role: assetIDJSON{PolicyID: hex.EncodeToString(p.RolesCurrency)}}
	if p.Role != nil {
		out.Role.AssetName = *p.Role
	}
	if p.Withdrawal != nil {
		id := p.Withdrawal.TxID
		out.WithdrawalID = &id
	}
	return out
}

type payoutLink struct {
	Payout string `json:"payout"`
}

type payoutStateJSON struct {
	payoutHeaderJSON
	PayoutValidatorAddress string `json:"payoutValidatorAddress"`
}

type payoutLinks struct {
	Contract    string `json:"contract"`
	Transaction string `json:"transaction"`
	Withdrawal  string `json:"withdrawal,omitempty"`
}

type withdrawalHeaderJSON struct {
	WithdrawalID chain.Hash32 `json:"withdrawalId"`
	Status       string       `json:"status"`
	Block        blockJSON    `json:"block"`
	// The follower's.
	Seq     int64 `json:"seq"`
	LastSeq int64 `json:"lastSeq"`
}

// withdrawalLinks are the Runtime's withdrawal link and, for the
// TypeScript SDK (0.4.0-beta), whose withdrawal list decoder requires
// them, links to the first contract of the withdrawal and its steps.
type withdrawalLinks struct {
	Withdrawal   string `json:"withdrawal"`
	Contract     string `json:"contract"`
	Transactions string `json:"transactions"`
}

type withdrawalJSON struct {
	withdrawalHeaderJSON
	Payouts []payoutHeaderJSON `json:"payouts"`
}

func withdrawalHeaderOf(wd *contractstore.Withdrawal) withdrawalHeaderJSON {
	return withdrawalHeaderJSON{WithdrawalID: wd.TxID, Status: confirmed, Block: blockOf(wd.Block), Seq: wd.Seq, LastSeq: wd.LastSeq}
}

func withdrawalOf(wd *contractstore.Withdrawal) withdrawalJSON {
	out := withdrawalJSON{withdrawalHeaderJSON: withdrawalHeaderOf(wd), Payouts: []payoutHeaderJSON{}}
	for i := range wd.Payouts {
		if wd.Payouts[i].Role != nil {
			out.Payouts = append(out.Payouts, payoutHeaderOf(&wd.Payouts[i]))
		}
	}
	return out
}
