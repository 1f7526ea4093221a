package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"go.uber.org/zap"

	"github.com/marlowe-follower/follower/contracts/contractstore"
	"github.com/marlowe-follower/follower/query/internal/api"
)

// errorJSON is the Runtime's error body. Details is an object with the
// follower's error code (the native API's, docs/query.md "Errors") in
// code, on every 4xx and 5xx the view answers; the Runtime puts other
// details there for some errors (the interval error of /next), which come
// along.
type errorJSON struct {
	Message   string `json:"message"`
	ErrorCode string `json:"errorCode"`
	Details   any    `json:"details"`
}

// codeDetails are the details of an error without more to say.
func codeDetails(code string) map[string]any { return map[string]any{"code": code} }

// fail is an error answered in the Runtime's format.
type fail struct {
	status  int
	code    string // the Runtime's errorCode
	message string
	details map[string]any // with "code"
}

func (e *fail) Error() string { return e.message }

// notFound is the Runtime's 404 for what a path names.
func notFound(message string) error {
	return &fail{status: http.StatusNotFound, code: "NotFound", message: message, details: codeDetails("not_found")}
}

// invalid is the Runtime's 400 for a malformed path or parameter; code is
// the native API's.
func invalid(code, message string) error {
	return &api.BadRequest{Code: code, Message: message}
}

// missing is err, or instead when err is contractstore.ErrNotFound.
func missing(err, instead error) error {
	if errors.Is(err, contractstore.ErrNotFound) {
		return instead
	}
	return err
}

// rangeError is a Range header the view cannot satisfy: 416.
type rangeError struct{ message string }

func (e *rangeError) Error() string { return e.message }

// writeError writes a Runtime error body.
func (v *View) writeError(w http.ResponseWriter, status int, code, message string, details any) {
	body, err := api.EncodeJSON(errorJSON{Message: message, ErrorCode: code, Details: details})
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"message":"the answer could not be encoded","errorCode":"Internal","details":{"code":"internal"}}`+"\n")
	}
	api.WriteBody(w, status, "application/json", body)
}

// dialect is how the view answers through api.Handle.
type dialect struct{ v *View }

func (d dialect) Position(w http.ResponseWriter, at contractstore.Position) { d.v.setHeaders(w, at) }

// Fail answers err in the Runtime's format: its own errors as they are,
// bad requests as 400 BadRequest, unknown ids 404, a minSeq not reached
// 503 NotYetApplied, a store that does not answer 503 StoreUnavailable.
func (d dialect) Fail(w http.ResponseWriter, r *http.Request, err error) {
	v := d.v
	var f *fail
	var br *api.BadRequest
	var re *rangeError
	var ny *api.NotYetApplied
	var ie *api.IntervalError
	switch {
	case errors.As(err, &f):
		v.writeError(w, f.status, f.code, f.message, f.details)
	case errors.As(err, &re):
		v.writeError(w, http.StatusRequestedRangeNotSatisfiable, "RangeNotSatisfiable", re.message, codeDetails("bad_range"))
	case errors.As(err, &br):
		v.writeError(w, http.StatusBadRequest, "BadRequest", br.Message, codeDetails(br.Code))
	case errors.As(err, &ie):
		details := codeDetails("bad_interval")
		if raw, err := json.Marshal(ie.Err); err == nil {
			var m map[string]json.RawMessage
			if json.Unmarshal(raw, &m) == nil {
				for k, x := range m {
					details[k] = x
				}
			}
		}
		v.writeError(w, http.StatusBadRequest, "invalidInterval", "Invalid Interval", details)
	case errors.Is(err, api.ErrContractClosed):
		v.writeError(w, http.StatusNotFound, "contractClosed", "Contract Closed", codeDetails("contract_closed"))
	case errors.Is(err, contractstore.ErrNotFound):
		v.writeError(w, http.StatusNotFound, "NotFound", "not found", codeDetails("not_found"))
	case errors.As(err, &ny):
		w.Header().Set(api.HeaderRetryAfter, "1")
		v.writeError(w, http.StatusServiceUnavailable, "NotYetApplied", ny.Error(), codeDetails("not_yet_applied"))
	case api.Canceled(r, err):
		v.writeError(w, 499, "Canceled", "the request was canceled", codeDetails("canceled"))
	default:
		v.log.Error("a read failed", zap.String("path", r.URL.Path), zap.Error(err))
		w.Header().Set(api.HeaderRetryAfter, "1")
		v.writeError(w, http.StatusServiceUnavailable, "StoreUnavailable", "the store could not answer; retry later", codeDetails("store_unavailable"))
	}
}

// handle is api.Handle in the view's dialect.
func handle[P any](v *View, parse func(r *http.Request, q *api.Query) (P, error),
	read func(ctx context.Context, p P) (api.Answer, error)) http.HandlerFunc {
	return api.Handle(v.env, dialect{v}, parse, read)
}
