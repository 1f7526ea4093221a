package history

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/classify"
	"github.com/marlowe-follower/follower/history/record"
)

// Step is the store's input for one chain event (the processor's output,
// history/processor): the records of a block, or a rollback. Steps carry
// no seqs: the store gives every record its seq as the steps arrive, the
// one place seqs are assigned.
type Step struct {
	Forward  *ForwardStep
	Rollback *RollbackStep
	// Credit is the follower whose credit the chain event took: the store
	// returns it (handoff.CreditsReturned) once the step is committed.
	Credit *actor.PID
	// Release, when set, is called once the step is committed (for
	// callers outside the pipeline: tests and tools).
	Release func()
}

// ForwardStep is a block rolled forward.
type ForwardStep struct {
	Header  chain.BlockHeader
	Tip     chain.Tip
	Records []record.Record // in chain order, Seq unset
	// Creations are the contracts the block created and Additions the
	// parties its records brought into contracts, each naming its record
	// by position in Records.
	Creations []Creation
	Additions []Addition
	UTxO      classify.UTxOChanges
}

// Creation is a contract a block created: its index entry (CreatedSeq
// unset: the store sets it to the seq of Records[Record]).
type Creation struct {
	Record   int
	Contract record.ContractIndex
}

// Addition is parties that Records[Record] brought into a contract (for
// example through a merkleized continuation).
type Addition struct {
	Record   int
	Contract chain.TxOutRef
	Parties  []record.Party
}

// RollbackStep is a rollback to a point.
type RollbackStep struct {
	To     chain.Point
	Tip    chain.Tip
	Undone []classify.UTxOChanges
}
