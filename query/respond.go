package query

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
)

// Response headers that say where an answer stands.
const (
	HeaderSeq        = "X-Marlowe-Seq"
	HeaderBlockSlot  = "X-Marlowe-Block-Slot"
	HeaderBlockNo    = "X-Marlowe-Block-No"
	HeaderBlockHash  = "X-Marlowe-Block-Hash"
	HeaderNodeTip    = "X-Node-Tip"
	HeaderNodeTipNo  = "X-Node-Tip-Block-No"
	HeaderRetryAfter = "Retry-After"
)

// apiError is the body of every error answer.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// badRequest is an error the client caused: answered 400 with its code.
type badRequest struct {
	code, message string
}

// Error returns the message.
func (e *badRequest) Error() string { return e.message }

func bad(code, message string) error { return &badRequest{code: code, message: message} }

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// bytesPool holds buffers for answers written by hand.
var bytesPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 32<<10)
	return &b
}}

// writeJSON writes v with the status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		code = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"code":"internal","message":"the answer could not be encoded"}` + "\n")
	}
	writeBody(w, code, buf.Bytes())
}

// encodeJSON returns v's JSON answer, for a cache.
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return buf.Bytes(), err
}

// writeBody writes an encoded JSON answer.
func writeBody(w http.ResponseWriter, code int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

func writeError(w http.ResponseWriter, code int, errCode, message string) {
	writeJSON(w, code, apiError{Code: errCode, Message: message})
}

// tipJSON is the node's tip as answers show it.
type tipJSON struct {
	Slot    uint64       `json:"slot"`
	BlockNo uint64       `json:"blockNo"`
	Hash    chain.Hash32 `json:"hash"`
}

func tipOf(t chain.Tip) tipJSON {
	return tipJSON{Slot: t.Point.Slot, BlockNo: t.BlockNo, Hash: t.Point.Hash}
}

// setPosition writes the position headers.
func setPosition(w http.ResponseWriter, at contractstore.Position, tip chain.Tip) {
	h := w.Header()
	h.Set(HeaderSeq, strconv.FormatInt(at.Seq, 10))
	h.Set(HeaderBlockSlot, strconv.FormatUint(at.Block.Slot, 10))
	h.Set(HeaderBlockNo, strconv.FormatUint(at.Block.BlockNo, 10))
	h.Set(HeaderBlockHash, at.Block.Hash.String())
	h.Set(HeaderNodeTip, tip.Point.String())
	h.Set(HeaderNodeTipNo, strconv.FormatUint(tip.BlockNo, 10))
}

// envelope wraps every list.
type envelope struct {
	Results any               `json:"results"`
	Next    *string           `json:"next"`
	Cursor  *string           `json:"cursor"`
	Total   *int64            `json:"total,omitempty"`
	Seq     int64             `json:"seq"`
	Block   chain.BlockHeader `json:"block"`
	NodeTip tipJSON           `json:"nodeTip"`
}

// fail answers an error: 400 for a client's mistake, 404 for an unknown
// id, 503 when the store cannot answer (logged).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error, what string) {
	var br *badRequest
	switch {
	case errors.As(err, &br):
		writeError(w, http.StatusBadRequest, br.code, br.message)
	case errors.Is(err, contractstore.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", what+" not found")
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away: nobody reads the answer.
		writeError(w, 499, "canceled", "the request was canceled")
	default:
		s.log.Error("a read failed", zap.String("path", r.URL.Path), zap.Error(err))
		w.Header().Set(HeaderRetryAfter, "1")
		writeError(w, http.StatusServiceUnavailable, "store_unavailable", "the store could not answer; retry later")
	}
}
