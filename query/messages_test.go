package query_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/actors/pipeline/projectiontest"
)

// TestErrorMessagesNameWhatWasGiven: a bad contract id is reported under
// the parameter's name (contractId, in the path or the query), a cursor
// that is no cursor as malformed, and only a well-made cursor of another
// list or order as one.
func TestErrorMessagesNameWhatWasGiven(t *testing.T) {
	f := newFixture(t, projectiontest.SQLite, 12, 40, nil)
	cur := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, c := range []struct{ path, code, message string }{
		{"/contracts/xyz", "bad_contract_id", `contractId "xyz": want TXID#INDEX`},
		{"/payouts?contractId=x", "bad_contract_id", `contractId "x": want TXID#INDEX`},
		{"/contracts?contractId=x", "bad_contract_id", `contractId "x": want TXID#INDEX`},
		{"/payouts/x", "bad_payout_id", `payoutId "x": want TXID#INDEX`},
		{"/contracts?cursor=!!!", "bad_cursor", "malformed cursor"},
		{"/contracts?cursor=" + cur("nonsense"), "bad_cursor", "malformed cursor"},
		{"/contracts?cursor=" + cur("ca:5:6"), "bad_cursor", "malformed cursor"},
		{"/contracts?cursor=" + cur("ca:x"), "bad_cursor", "malformed cursor"},
		{"/contracts?cursor=" + cur("w:5"), "bad_cursor", "the cursor belongs to another list or order"},
		{"/contracts?order=desc&cursor=" + cur("ca:5"), "bad_cursor", "the cursor belongs to another list or order"},
		{"/withdrawals?cursor=" + cur("t:5"), "bad_cursor", "the cursor belongs to another list or order"},
	} {
		var e struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		f.get(c.path, http.StatusBadRequest).decode(t, &e)
		if e.Code != c.code || !strings.HasPrefix(e.Message, c.message) {
			t.Errorf("%s: %s %q, want %s %q", c.path, e.Code, e.Message, c.code, c.message)
		}
	}
}
