package query

import (
	"encoding/hex"
	"encoding/json"
	"net/url"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/record"
)

// The resources of the runtime view, as the Marlowe Runtime 1.0.0 shows
// them; the fields after "the follower's" are extras under names the
// Runtime does not use.

// rtVersion is the Marlowe language version (the Runtime's "version"): all
// five script versions run Marlowe Core V1.
const rtVersion = "v1"

// rtConfirmed is every transaction's status: a follower sees only
// transactions on chain.
const rtConfirmed = "confirmed"

type rtItem struct {
	Resource any `json:"resource"`
	Links    any `json:"links"`
}

type rtList struct {
	Results []rtItem `json:"results"`
}

// Links are relative to the API root, as the Runtime writes them.
func linkContract(id chain.TxOutRef) string { return "contracts/" + url.PathEscape(id.String()) }

func linkTransactions(id chain.TxOutRef) string { return linkContract(id) + "/transactions" }

func linkTransaction(id chain.TxOutRef, tx chain.Hash32) string {
	return linkTransactions(id) + "/" + tx.String()
}

func linkPayout(id chain.TxOutRef) string { return "payouts/" + url.PathEscape(id.String()) }

func linkWithdrawal(tx chain.Hash32) string { return "withdrawals/" + tx.String() }

type rtContractHeaderJSON struct {
	ContractID    chain.TxOutRef  `json:"contractId"`
	RolesCurrency string          `json:"roleTokenMintingPolicyId"`
	Version       string          `json:"version"`
	Tags          json.RawMessage `json:"tags"`
	Metadata      json.RawMessage `json:"metadata"`
	Status        string          `json:"status"`
	Block         rtBlockJSON     `json:"block"`
	// The follower's.
	ScriptVersion  string      `json:"scriptVersion"`
	ContractStatus string      `json:"contractStatus"`
	Address        string      `json:"address"`
	Seq            int64       `json:"seq"`
	Steps          int         `json:"steps"`
	LastSeq        int64       `json:"lastSeq"`
	LastBlock      rtBlockJSON `json:"lastBlock"`
}

func rtContractHeaderOf(c *contractstore.Contract) rtContractHeaderJSON {
	return rtContractHeaderJSON{
		ContractID: c.ID, RolesCurrency: hex.EncodeToString(c.RolesCurrency), Version: rtVersion,
		Tags: rawOr(c.Tags, "{}"), Metadata: rawOr(c.Metadata, "{}"), Status: rtConfirmed, Block: rtBlock(c.Block),
		ScriptVersion: c.Version, ContractStatus: string(c.Status), Address: c.Address, Seq: c.Seq, Steps: c.Steps,
		LastSeq: c.LastSeq, LastBlock: rtBlock(c.LastBlock),
	}
}

type rtContractLinks struct {
	Contract     string `json:"contract"`
	Transactions string `json:"transactions"`
}

type rtUnclaimedPayoutJSON struct {
	PayoutID chain.TxOutRef `json:"payoutId"`
	Role     string         `json:"role"`
	Assets   record.Assets  `json:"assets"`
}

type rtContractStateJSON struct {
	rtContractHeaderJSON
	InitialContract  json.RawMessage         `json:"initialContract"`
	InitialState     json.RawMessage         `json:"initialState"`
	CurrentContract  json.RawMessage         `json:"currentContract,omitempty"` // absent once closed
	State            json.RawMessage         `json:"state,omitempty"`
	UTxO             *chain.TxOutRef         `json:"utxo,omitempty"`
	Assets           record.Assets           `json:"assets"`
	UnclaimedPayouts []rtUnclaimedPayoutJSON `json:"unclaimedPayouts"`
}

type rtTransactionsLink struct {
	Transactions string `json:"transactions"`
}

func rtContractStateOf(c *contractstore.Contract) rtContractStateJSON {
	out := rtContractStateJSON{rtContractHeaderJSON: rtContractHeaderOf(c), UnclaimedPayouts: []rtUnclaimedPayoutJSON{}}
	b := c.Body
	if b == nil {
		b = &contractstore.ContractBody{}
	}
	out.InitialContract, out.InitialState = rawOr(b.InitialContract, "null"), rawOr(b.InitialState, "null")
	out.CurrentContract, out.State, out.UTxO = nonNull(b.Contract), nonNull(b.State), b.UTxO
	out.Assets = assetsOf(b.Assets)
	for _, p := range b.Payouts {
		if p.Role != nil && p.Status == contractstore.PayoutAvailable {
			out.UnclaimedPayouts = append(out.UnclaimedPayouts, rtUnclaimedPayoutJSON{PayoutID: p.ID, Role: *p.Role, Assets: assetsOf(p.Assets)})
		}
	}
	return out
}

type rtTxHeaderJSON struct {
	ContractID    chain.TxOutRef  `json:"contractId"`
	TransactionID chain.Hash32    `json:"transactionId"`
	Tags          json.RawMessage `json:"tags"`
	Metadata      json.RawMessage `json:"metadata"`
	Status        string          `json:"status"`
	Block         rtBlockJSON     `json:"block"`
	UTxO          *chain.TxOutRef `json:"utxo,omitempty"`
	// The follower's.
	Seq int64 `json:"seq"`
}

type rtTransactionLink struct {
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

func rtTxHeaderOf(t *contractstore.Transaction, p *stepPayload) rtTxHeaderJSON {
	return rtTxHeaderJSON{ContractID: t.ContractID, TransactionID: t.TxID, Tags: objectOf(p.Tags), Metadata: objectOf(p.Metadata),
		Status: rtConfirmed, Block: rtBlock(t.Block), UTxO: t.Output, Seq: t.Seq}
}

type rtPayoutJSON struct {
	PayoutID chain.TxOutRef `json:"payoutId"`
	Role     string         `json:"role"`
	Assets   record.Assets  `json:"assets"`
}

type rtTxJSON struct {
	rtTxHeaderJSON
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
	Payouts                     []rtPayoutJSON  `json:"payouts"`
	ReconstructedSemanticInput  json.RawMessage `json:"reconstructedSemanticInput"`
	ReconstructedSemanticOutput json.RawMessage `json:"reconstructedSemanticOutput"`
	// The follower's: the interval as the semantics see it (POSIX ms, both
	// ends inclusive) and as the ledger has it (slots).
	Interval record.Interval `json:"interval"`
}

type rtTxLinks struct {
	Previous string `json:"previous,omitempty"`
	Next     string `json:"next,omitempty"`
}

type rtAssetIDJSON struct {
	PolicyID  string `json:"policyId"`
	AssetName string `json:"assetName"`
}

type rtPayoutHeaderJSON struct {
	ContractID   chain.TxOutRef `json:"contractId"`
	PayoutID     chain.TxOutRef `json:"payoutId"`
	Role         rtAssetIDJSON  `json:"role"`
	Status       string         `json:"status"`
	WithdrawalID *chain.Hash32  `json:"withdrawalId,omitempty"`
	// The follower's.
	Assets        record.Assets `json:"assets"`
	TransactionID chain.Hash32  `json:"transactionId"`
	Seq           int64         `json:"seq"`
	Block         rtBlockJSON   `json:"block"`
}

func rtPayoutHeaderOf(p *contractstore.Payout) rtPayoutHeaderJSON {
	out := rtPayoutHeaderJSON{ContractID: p.ContractID, PayoutID: p.ID, Status: string(p.Status), Assets: assetsOf(p.Assets),
		TransactionID: p.TxID, Seq: p.Seq, Block: rtBlock(p.Block),
		Role: rtAssetIDJSON{PolicyID: hex.EncodeToString(p.RolesCurrency)}}
	if p.Role != nil {
		out.Role.AssetName = *p.Role
	}
	if p.Withdrawal != nil {
		id := p.Withdrawal.TxID
		out.WithdrawalID = &id
	}
	return out
}

type rtPayoutLink struct {
	Payout string `json:"payout"`
}

type rtPayoutStateJSON struct {
	rtPayoutHeaderJSON
	PayoutValidatorAddress string `json:"payoutValidatorAddress"`
}

type rtPayoutLinks struct {
	Contract    string `json:"contract"`
	Transaction string `json:"transaction"`
	Withdrawal  string `json:"withdrawal,omitempty"`
}

type rtWithdrawalHeaderJSON struct {
	WithdrawalID chain.Hash32 `json:"withdrawalId"`
	Status       string       `json:"status"`
	Block        rtBlockJSON  `json:"block"`
	// The follower's.
	Seq     int64 `json:"seq"`
	LastSeq int64 `json:"lastSeq"`
}

// rtWithdrawalLinks are the Runtime's withdrawal link and, for the
// TypeScript SDK (0.4.0-beta), whose withdrawal list decoder requires
// them, links to the first contract of the withdrawal and its steps.
type rtWithdrawalLinks struct {
	Withdrawal   string `json:"withdrawal"`
	Contract     string `json:"contract"`
	Transactions string `json:"transactions"`
}

type rtWithdrawalJSON struct {
	rtWithdrawalHeaderJSON
	Payouts []rtPayoutHeaderJSON `json:"payouts"`
}

func rtWithdrawalHeaderOf(wd *contractstore.Withdrawal) rtWithdrawalHeaderJSON {
	return rtWithdrawalHeaderJSON{WithdrawalID: wd.TxID, Status: rtConfirmed, Block: rtBlock(wd.Block), Seq: wd.Seq, LastSeq: wd.LastSeq}
}

func rtWithdrawalOf(wd *contractstore.Withdrawal) rtWithdrawalJSON {
	out := rtWithdrawalJSON{rtWithdrawalHeaderJSON: rtWithdrawalHeaderOf(wd), Payouts: []rtPayoutHeaderJSON{}}
	for i := range wd.Payouts {
		if wd.Payouts[i].Role != nil {
			out.Payouts = append(out.Payouts, rtPayoutHeaderOf(&wd.Payouts[i]))
		}
	}
	return out
}
