package query

import (
	"context"
	"net/http"
	"strconv"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// historyKinds are the record kinds a contract's history shows: every kind
// but the RolledBack markers, which concern no contract (a rolled-back
// record carries the marker's seq in rolledBackBy).
var historyKinds = []record.Kind{record.KindContractCreated, record.KindInputsApplied,
	record.KindPayoutWithdrawn, record.KindApplyInputsRejected}

// historyRequest is a page of a contract's history: as of the history head
// asOf (-1: the head now, for a first page), after seq after.
type historyRequest struct {
	id          chain.TxOutRef
	mode        record.Mode
	asOf, after int64
	limit       int
	r           *http.Request
	q           *api.Query
}

// contractHistory lists a contract's history records, as of the history
// head when the first page was asked: the current ones, or with
// includeRolledBack=true every one, rolled back or not.
func (s *Server) contractHistory() http.HandlerFunc {
	return handle(s, parseHistory, s.readHistory)
}

func parseHistory(r *http.Request, q *api.Query) (*historyRequest, error) {
	if err := q.Allow("includeRolledBack", "limit", "cursor"); err != nil {
		return nil, err
	}
	req := &historyRequest{asOf: -1, r: r, q: q}
	var err error
	if req.id, err = api.ParseRef("contract_id", r.PathValue("contractId")); err != nil {
		return nil, err
	}
	all, err := q.Flag("includeRolledBack")
	if err != nil {
		return nil, err
	}
	if req.limit, err = q.Limit(); err != nil {
		return nil, err
	}
	req.mode = record.ModeSnapshot
	if all {
		req.mode = record.ModeLog
	}
	n, err := cursorOf(q, cursorHistory)
	if err != nil || n == nil {
		return req, err
	}
	if n[0] != int64(req.mode) {
		return nil, api.Bad("bad_cursor", "the cursor was made with another includeRolledBack")
	}
	req.asOf, req.after = n[1], n[2]
	return req, nil
}

func (s *Server) readHistory(ctx context.Context, req *historyRequest) (api.Answer, error) {
	if _, err := s.cfg.History.ContractGet(ctx, req.id); err != nil {
		return api.Answer{}, api.NotFound(err, "contract "+req.id.String())
	}
	asOf := req.asOf
	if asOf < 0 {
		asOf = s.cfg.History.Head()
	}
	at := contractstore.Position{Seq: asOf}
	recs := []record.Record{}
	if asOf > 0 {
		head, err := s.cfg.History.RecordGet(ctx, asOf)
		if err != nil {
			return api.Answer{}, api.NotFound(err, "history record "+strconv.FormatInt(asOf, 10))
		}
		at.Block = head.Block
		p := &record.RecordListParams{Filter: record.Filter{Contracts: []chain.TxOutRef{req.id}, Kinds: historyKinds},
			Mode: req.mode, After: req.after, Limit: req.limit + 1}
		if p.Mode == record.ModeSnapshot {
			p.Snapshot = asOf
		} else {
			p.UpTo = asOf
		}
		if recs, err = s.cfg.History.RecordList(ctx, p); err != nil {
			return api.Answer{}, err
		}
	}
	if recs == nil {
		recs = []record.Record{}
	}
	var next string
	if len(recs) > req.limit {
		recs = recs[:req.limit]
		next = encodeCursor(cursorHistory, strconv.FormatInt(int64(req.mode), 10), strconv.FormatInt(asOf, 10),
			strconv.FormatInt(recs[len(recs)-1].Seq, 10))
	}
	return s.listAnswer(req.r, req.q, at, recs, next)
}
