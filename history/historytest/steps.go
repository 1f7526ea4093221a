package historytest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
)

// StepChain makes the store's input for tests of the store and its
// subscribers: steps of a synthetic chain, blocks of up to three records
// of eight contracts (each created once, sometimes again on a fork; tagged
// tag0 or tag1, roles currency 0, 1 or 2), and rollbacks of one to three
// blocks, about one step in rollbackOdds.
type StepChain struct {
	rng          *rand.Rand
	rollbackOdds int
	created      map[int]bool
	headers      []chain.BlockHeader
	fork         byte
}

// NewStepChain returns a chain drawn from rng.
func NewStepChain(rng *rand.Rand, rollbackOdds int) *StepChain {
	return &StepChain{rng: rng, rollbackOdds: rollbackOdds, created: map[int]bool{}}
}

// Rand returns the chain's random source, for a test's other draws.
func (m *StepChain) Rand() *rand.Rand { return m.rng }

// StepContract is the id of the chain's i-th contract.
func StepContract(i int) chain.TxOutRef {
	var h chain.Hash32
	h[0], h[31] = 0xc0, byte(i)
	return chain.TxOutRef{TxID: h, Index: uint32(i)}
}

// Next returns the next step: mostly a block, sometimes a rollback.
func (m *StepChain) Next() *history.Step {
	if len(m.headers) > 4 && m.rng.IntN(m.rollbackOdds) == 0 {
		depth := 1 + m.rng.IntN(3)
		to := m.headers[len(m.headers)-1-depth]
		m.headers = m.headers[:len(m.headers)-depth]
		m.fork++
		return &history.Step{Rollback: &history.RollbackStep{To: to.Point(), Tip: chain.Tip{Point: to.Point(), BlockNo: to.BlockNo}}}
	}
	n := uint64(len(m.headers) + 1)
	var hash chain.Hash32
	hash[0], hash[1], hash[2] = byte(n), byte(n>>8), m.fork
	h := chain.BlockHeader{Slot: n * 10, BlockNo: n, Hash: hash}
	m.headers = append(m.headers, h)
	fs := &history.ForwardStep{Header: h, Tip: chain.Tip{Point: h.Point(), BlockNo: h.BlockNo + 100}}
	for i := range m.rng.IntN(4) {
		c := m.rng.IntN(8)
		kind := record.KindInputsApplied
		if !m.created[c] || m.rng.IntN(5) == 0 {
			m.created[c] = true
			kind = record.KindContractCreated
			fs.Creations = append(fs.Creations, history.Creation{Record: len(fs.Records), Contract: record.ContractIndex{
				ID: StepContract(c), Version: "v5", RolesCurrency: []byte{byte(c % 3)},
				Tags: []string{fmt.Sprintf("tag%d", c%2)}, Block: h,
			}})
		}
		id := StepContract(c)
		payload, _ := json.Marshal(map[string]any{"n": n, "i": i})
		fs.Records = append(fs.Records, record.Record{Kind: kind, Block: h, TxIndex: i, Contract: &id, Payload: payload})
	}
	return &history.Step{Forward: fs}
}
