package contracts

import (
	"context"
	"encoding/json"
	"fmt"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/history/record"
)

// rebuildChunk is how many contracts one history read filters on.
const rebuildChunk = 500

// rollBack applies a RolledBack marker. The contracts it changes are those
// whose newest applied record is in a block after the point rolled back to
// (a contract's records are in chain order, so it has a record after the
// point exactly when its newest one is). Each is rebuilt from scratch from
// its records current as of the marker's seq, read from the history
// backend, and the rebuilt rows replace the old ones in one commit with the
// marker as the new cursor.
func (s *projector) rollBack(ctx context.Context, head *contractstore.Head, marker *record.Record) error {
	var rb record.RolledBack
	if err := json.Unmarshal(marker.Payload, &rb); err != nil {
		return fmt.Errorf("record %d: rolled_back payload: %w", marker.Seq, err)
	}
	refs, err := s.cfg.Backend.ContractsAfterSlot(ctx, rb.To.Slot)
	if err != nil {
		return fmt.Errorf("rollback at seq %d: finding the contracts it changes: %w", marker.Seq, err)
	}
	f := newFolder(nil, s.log)
	ids := make([]chain.TxOutRef, len(refs))
	for i, ref := range refs {
		f.seed(ref)
		ids[i] = ref.ID
	}
	if err := foldCurrent(ctx, s.cfg.History, f, ids, marker.Seq, s.cfg.RebuildPage); err != nil {
		return fmt.Errorf("rollback at seq %d: %w", marker.Seq, err)
	}
	p := f.finish(*head, contractstore.Position{Seq: marker.Seq, Block: marker.Block})
	p.Reset = ids
	if err := s.commit(ctx, head, p); err != nil {
		return err
	}
	s.stats.Rollbacks.Add(1)
	s.stats.RebuiltContracts.Add(uint64(len(ids)))
	s.log.Info("rolled back", zap.Int64("seq", marker.Seq), zap.Stringer("to", rb.To), zap.Int("contracts", len(ids)))
	return nil
}

// foldCurrent folds the records of the given contracts that are current as
// of seq asOf (the log's state after its first asOf records), in seq order
// per contract.
func foldCurrent(ctx context.Context, b recordLister, f *folder, ids []chain.TxOutRef, asOf int64, page int) error {
	for start := 0; start < len(ids); start += rebuildChunk {
		chunk := ids[start:min(len(ids), start+rebuildChunk)]
		var after int64
		for {
			recs, err := b.RecordList(ctx, &record.RecordListParams{
				Filter: record.Filter{Contracts: chunk}, Mode: record.ModeSnapshot, Snapshot: asOf, After: after, Limit: page,
			})
			if err != nil {
				return fmt.Errorf("reading records as of seq %d: %w", asOf, err)
			}
			for i := range recs {
				if err := f.apply(ctx, &recs[i]); err != nil {
					return err
				}
			}
			if len(recs) < page {
				break
			}
			after = recs[len(recs)-1].Seq
		}
	}
	return nil
}

// recordLister reads the log: the history's Handle, or a backend in tests.
type recordLister interface {
	RecordList(ctx context.Context, p *record.RecordListParams) ([]record.Record, error)
}

// Fold folds, from scratch, every record of the history log that is current
// as of seq asOf into the rows a projection would hold: the reference the
// projection's tests compare it with, and a way to check a live store
// (contractstoretest loads the result into a backend). ids limits it to
// some contracts; nil folds them all.
func Fold(ctx context.Context, b history.Backend, asOf int64, ids []chain.TxOutRef, log *zap.Logger) (*contractstore.CommitParams, error) {
	if log == nil {
		log = zap.NewNop()
	}
	f := newFolder(nil, log)
	if ids != nil {
		if err := foldCurrent(ctx, b, f, ids, asOf, DefaultRebuildPage); err != nil {
			return nil, err
		}
	} else {
		var after int64
		for {
			recs, err := b.RecordList(ctx, &record.RecordListParams{Mode: record.ModeSnapshot, Snapshot: asOf, After: after, Limit: DefaultRebuildPage})
			if err != nil {
				return nil, err
			}
			for i := range recs {
				if err := f.apply(ctx, &recs[i]); err != nil {
					return nil, err
				}
			}
			if len(recs) < DefaultRebuildPage {
				break
			}
			after = recs[len(recs)-1].Seq
		}
	}
	var at contractstore.Position
	if asOf > 0 {
		r, err := b.RecordGet(ctx, asOf)
		if err != nil {
			return nil, err
		}
		at = contractstore.Position{Seq: asOf, Block: r.Block}
	}
	return f.finish(contractstore.Head{}, at), nil
}
