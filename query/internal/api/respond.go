package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/history/record"
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

// Map returns f of each element of in, in order: a page's rows as their
// JSON views.
func Map[T, U any](in []T, f func(*T) U) []U {
	out := make([]U, len(in))
	for i := range in {
		out[i] = f(&in[i])
	}
	return out
}

// SetPosition writes the native position headers.
func SetPosition(w http.ResponseWriter, at contractstore.Position, tip chain.Tip) {
	h := w.Header()
	h.Set(HeaderSeq, strconv.FormatInt(at.Seq, 10))
	h.Set(HeaderBlockSlot, strconv.FormatUint(at.Block.Slot, 10))
	h.Set(HeaderBlockNo, strconv.FormatUint(at.Block.BlockNo, 10))
	h.Set(HeaderBlockHash, at.Block.Hash.String())
	h.Set(HeaderNodeTip, tip.Point.String())
	h.Set(HeaderNodeTipNo, strconv.FormatUint(tip.BlockNo, 10))
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// bytesPool holds buffers for answers written by hand.
var bytesPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 32<<10)
	return &b
}}

// Buffer returns a pooled buffer for an answer written by hand and the
// function that returns it (Answer.Release).
func Buffer() (*[]byte, func()) {
	bp := bytesPool.Get().(*[]byte)
	*bp = (*bp)[:0]
	return bp, func() {
		if cap(*bp) <= 1<<20 { // keep the pool's buffers small
			*bp = (*bp)[:0]
			bytesPool.Put(bp)
		}
	}
}

// EncodeJSON returns v's JSON answer (a newline after it, HTML not
// escaped).
func EncodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return buf.Bytes(), err
}

// WriteJSON writes v as an application/json answer with the status code.
func WriteJSON(w http.ResponseWriter, code int, v any) {
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
	WriteBody(w, code, "application/json", buf.Bytes())
}

// WriteBody writes an encoded answer.
func WriteBody(w http.ResponseWriter, code int, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// JSONAnswer encodes v as a 200 answer at position at.
func JSONAnswer(at contractstore.Position, v any) (Answer, error) {
	body, err := EncodeJSON(v)
	return Answer{At: at, Body: body}, err
}

// RawOr is stored JSON, or def when there is none.
func RawOr(raw json.RawMessage, def string) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(def)
	}
	return raw
}

// Assets are assets as answers show them: tokens an object, {} for none.
func Assets(a record.Assets) record.Assets {
	if a.Tokens == nil {
		a.Tokens = map[string]map[string]json.Number{}
	}
	return a
}
