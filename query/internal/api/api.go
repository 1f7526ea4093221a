// Package api is what the query port's two HTTP APIs share: the native API
// (package query) and the Marlowe Runtime view (query/runtime). Both read
// the same stores through the same interfaces and answer every read the
// same way: Handle parses the request, waits for minSeq, reads, writes the
// position headers and the answer; only the error bodies and the headers
// differ, which each API's Dialect writes. It also holds the parsing of
// the parameters both take (ids, the filter vocabulary, minSeq), the JSON
// writers, and the next-step computation both answer.
package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/record"
)

// ContractReader is the read side of the contract projection
// (contracts.Store; a contractstore.Backend has the same methods).
type ContractReader interface {
	Ping(ctx context.Context) error
	ContractGet(ctx context.Context, id chain.TxOutRef) (*contractstore.Contract, contractstore.Position, error)
	ContractList(ctx context.Context, p *contractstore.ContractListParams) (*contractstore.ContractPage, error)
	TransactionList(ctx context.Context, p *contractstore.TransactionListParams) (*contractstore.TransactionPage, error)
	TransactionGet(ctx context.Context, contract chain.TxOutRef, tx chain.Hash32) (*contractstore.Transaction, contractstore.Position, error)
	TransactionProducing(ctx context.Context, contract, out chain.TxOutRef) (*contractstore.Transaction, contractstore.Position, error)
	TransactionSpending(ctx context.Context, contract, in chain.TxOutRef) (*contractstore.Transaction, contractstore.Position, error)
	TransactionOfTx(ctx context.Context, tx chain.Hash32) (*contractstore.Transaction, contractstore.Position, error)
	PayoutList(ctx context.Context, p *contractstore.PayoutListParams) (*contractstore.PayoutPage, error)
	PayoutGet(ctx context.Context, id chain.TxOutRef) (*contractstore.Payout, contractstore.Position, error)
	WithdrawalList(ctx context.Context, p *contractstore.WithdrawalListParams) (*contractstore.WithdrawalPage, error)
	WithdrawalGet(ctx context.Context, tx chain.Hash32) (*contractstore.Withdrawal, contractstore.Position, error)
	SourceGet(ctx context.Context, hash chain.Hash32) (*contractstore.SourceInfo, contractstore.Position, error)
	SourceClosure(ctx context.Context, hash chain.Hash32, withContracts bool) (*contractstore.SourceClosure, contractstore.Position, error)
}

// HistoryReader is the read side of the history log (history.Handle): reads
// of committed records only.
type HistoryReader interface {
	// Head is the newest committed seq.
	Head() int64
	RecordList(ctx context.Context, p *record.RecordListParams) ([]record.Record, error)
	RecordGet(ctx context.Context, seq int64) (*record.Record, error)
	ContractGet(ctx context.Context, id chain.TxOutRef) (*record.ContractIndex, error)
}

// Projection is what the APIs need from the contract projection
// (contracts.Store implements it).
type Projection interface {
	// Applied returns the position the projection has committed.
	Applied() contractstore.Position
	// WaitFor waits until the projection has applied seq or ctx ends.
	WaitFor(ctx context.Context, seq int64) error
}

// Env is what every read of both APIs runs with.
type Env struct {
	Contracts  ContractReader
	History    HistoryReader
	Projection Projection
	// MinSeqWait bounds the wait of minSeq; RequestTimeout each request's
	// reads.
	MinSeqWait, RequestTimeout time.Duration
}

// Dialect is how an API writes what every answer carries and its errors.
type Dialect interface {
	// Position writes the headers of the position an answer reflects.
	Position(w http.ResponseWriter, at contractstore.Position)
	// Fail answers an error: a *BadRequest, a *NotFoundError (or
	// contractstore.ErrNotFound), a *NotYetApplied, the API's own errors;
	// anything else is the store's failure (503).
	Fail(w http.ResponseWriter, r *http.Request, err error)
}

// Answer is a read's answer: the position it reflects and its encoded body.
type Answer struct {
	At contractstore.Position
	// Status is the status code (200 when 0).
	Status int
	// ContentType is the body's type ("application/json" when "").
	ContentType string
	// Header holds headers to send besides the position's (nil for none).
	Header http.Header
	Body   []byte
	// Release, when set, is called once the body is written (it returns a
	// pooled buffer).
	Release func()
}

// Route is one route of an API: a net/http ServeMux pattern and its
// handler.
type Route struct {
	Pattern string
	Handler http.HandlerFunc
}

// Handle answers a route's reads: parse reads the request (its path values
// and query string); then minSeq is awaited, read reads the stores within
// the request timeout, and the answer is written with the position
// headers of the read. Errors carry a position too: the read's when it
// has one (a not-found says as of which seq), else the projection's.
func Handle[P any](e *Env, d Dialect, parse func(r *http.Request, q *Query) (P, error),
	read func(ctx context.Context, p P) (Answer, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q, err := ParseQuery(r)
		var p P
		if err == nil {
			p, err = parse(r, q)
		}
		var minSeq int64
		if err == nil {
			minSeq, err = q.MinSeq()
		}
		if err != nil {
			d.Position(w, e.Projection.Applied())
			d.Fail(w, r, err)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), e.RequestTimeout)
		defer cancel()
		if err := e.Wait(ctx, minSeq); err != nil {
			d.Position(w, e.Projection.Applied())
			d.Fail(w, r, err)
			return
		}
		a, err := read(ctx, p)
		if a.Release != nil {
			defer a.Release()
		}
		if a.At == (contractstore.Position{}) {
			a.At = e.Projection.Applied() // an error before the read: where the projection stands
		}
		d.Position(w, a.At)
		if err != nil {
			d.Fail(w, r, err)
			return
		}
		for k, vs := range a.Header {
			w.Header()[k] = vs
		}
		status := a.Status
		if status == 0 {
			status = http.StatusOK
		}
		ct := a.ContentType
		if ct == "" {
			ct = "application/json"
		}
		WriteBody(w, status, ct, a.Body)
	}
}

// Wait waits until the projection has applied minSeq (nothing when 0), up
// to MinSeqWait; a *NotYetApplied when it did not in time.
func (e *Env) Wait(ctx context.Context, minSeq int64) error {
	if minSeq <= 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, e.MinSeqWait)
	err := e.Projection.WaitFor(wctx, minSeq)
	cancel()
	if err == nil {
		return nil
	}
	if r := ctx.Err(); r != nil {
		return r
	}
	return &NotYetApplied{At: e.Projection.Applied(), MinSeq: minSeq, Waited: e.MinSeqWait}
}

// NotYetApplied is a minSeq the projection did not reach in time: 503 with
// Retry-After.
type NotYetApplied struct {
	At     contractstore.Position
	MinSeq int64
	Waited time.Duration
}

func (e *NotYetApplied) Error() string {
	return fmt.Sprintf("the projection has applied seq %d, not yet seq %d (waited %s); retry later", e.At.Seq, e.MinSeq, e.Waited)
}

// BadRequest is an error the client caused: 400 with its code. Param,
// when set, is the parameter at fault.
type BadRequest struct {
	Code, Message string
	Param         string
}

// Error returns the message.
func (e *BadRequest) Error() string { return e.Message }

// Bad returns a *BadRequest.
func Bad(code, message string) error { return &BadRequest{Code: code, Message: message} }

// NotFoundError is an id that names nothing as of the read's position: 404.
// What names it ("contract X").
type NotFoundError struct{ What string }

func (e *NotFoundError) Error() string { return e.What + " not found" }

// Is makes it a contractstore.ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == contractstore.ErrNotFound }

// NotFound names what a not-found error did not find; other errors are
// returned as they are.
func NotFound(err error, what string) error {
	var nf *NotFoundError
	if errors.Is(err, contractstore.ErrNotFound) && !errors.As(err, &nf) {
		return &NotFoundError{What: what}
	}
	return err
}

// Canceled reports an error of a request whose client went away: nobody
// reads the answer.
func Canceled(r *http.Request, err error) bool {
	return errors.Is(err, context.Canceled) && r.Context().Err() != nil
}
