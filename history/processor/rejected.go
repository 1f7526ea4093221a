package processor

import (
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// Reasons an output to a Marlowe validator cannot be followed: the label
// of marlowe_rejected_outputs_total.
const (
	// RejectDatumMissing: no datum, or a datum hash without the datum in
	// the transaction's witness set.
	RejectDatumMissing = "datum_missing"
	// RejectDatumUndecodable: the datum is not Plutus Data.
	RejectDatumUndecodable = "datum_undecodable"
	// RejectDatumNotMarloweData: the datum is Plutus Data but not MarloweData.
	RejectDatumNotMarloweData = "datum_not_marlowe_data"
	// RejectOther: any other reason.
	RejectOther = "other"
)

// RejectReasons lists every reason, for metrics that show each one.
var RejectReasons = []string{RejectDatumMissing, RejectDatumUndecodable, RejectDatumNotMarloweData, RejectOther}

// RejectReason sorts a classifier's rejection text into a reason.
func RejectReason(text string) string {
	switch {
	case strings.HasPrefix(text, "the output has no datum"), strings.HasPrefix(text, "datum hash "):
		return RejectDatumMissing
	case strings.HasPrefix(text, "datum is not MarloweData"):
		return RejectDatumNotMarloweData
	case strings.Contains(text, "cbor"), strings.Contains(text, "CBOR"), strings.Contains(text, "plutus data"),
		strings.Contains(text, "Plutus Data"):
		return RejectDatumUndecodable
	}
	return RejectOther
}

// maxRejectedSeen bounds the outputs remembered as logged: past it the
// memory starts over (an output seen again then is logged again).
const maxRejectedSeen = 10000

// rejectedOutputs counts the outputs to Marlowe validators that cannot be
// followed (a contract cannot start from them) and logs each once: a
// chain may hold many (the devnet makes them on purpose), and they are
// the chain's business, not the follower's trouble.
type rejectedOutputs struct {
	mu     sync.Mutex
	counts map[string]uint64
	seen   map[chain.TxOutRef]struct{}
}

// rejectedOutput counts an output that cannot be followed and logs it at
// INFO the first time it is seen (a rollback and replay shows it again).
func (p *Processor) rejectedOutput(ref chain.TxOutRef, version, reason string) {
	r := &p.rejected
	why := RejectReason(reason)
	r.mu.Lock()
	if r.counts == nil {
		r.counts = map[string]uint64{}
	}
	if r.seen == nil || len(r.seen) >= maxRejectedSeen {
		r.seen = map[chain.TxOutRef]struct{}{}
	}
	_, again := r.seen[ref]
	r.seen[ref] = struct{}{}
	if !again {
		r.counts[why]++
	}
	r.mu.Unlock()
	if again {
		return
	}
	p.log.Info("an output to a Marlowe validator cannot be followed (counted in marlowe_rejected_outputs_total)",
		zap.Stringer("output", ref), zap.String("version", version), zap.String("reason", why), zap.String("detail", reason))
}

// RejectedOutputs returns how many outputs to Marlowe validators could not
// be followed, by reason (RejectReasons); any goroutine may call it.
func (p *Processor) RejectedOutputs() map[string]uint64 {
	r := &p.rejected
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]uint64, len(r.counts))
	for k, v := range r.counts {
		out[k] = v
	}
	return out
}
