package query_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/chainsync/devnet"
	"github.com/marlowe-follower/follower/query"
)

// The runtime view is checked against the Marlowe Runtime 1.0.0's own
// golden OpenAPI document (testdata/marlowe-runtime, copied unchanged).

// devnetSlots is the devnet's slot clock.
var devnetSlots = chain.SlotConfig{ZeroTimeMillis: devnet.ZeroTimeMillis, SlotLengthMillis: devnet.SlotLengthMillis}

// withRuntime serves the runtime view.
func withRuntime(c *query.Config) { c.Slots = &devnetSlots }

// rtGet asks the view for path (below /runtime) with the given request
// headers and checks the answer against the Runtime's document; want is
// the expected status (0: any).
func (f *fixture) rtGet(path string, header http.Header, want int) *answer {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.base+query.RuntimePrefix+path, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	a := f.send(req, want)
	for _, h := range []string{"X-Runtime-Version", "X-Network-Id", "X-Node-Tip", "X-Runtime-Chain-Tip", "X-Runtime-Tip", query.HeaderSeq} {
		if a.header.Get(h) == "" {
			f.t.Fatalf("GET /runtime%s: no %s header", path, h)
		}
	}
	if v := a.header.Get("X-Runtime-Version"); v != query.RuntimeVersion {
		f.t.Fatalf("X-Runtime-Version %q", v)
	}
	if a.code >= 400 {
		var e map[string]json.RawMessage
		err := json.Unmarshal(a.body, &e)
		var msg, code string
		if err == nil {
			err = errors.Join(json.Unmarshal(e["message"], &msg), json.Unmarshal(e["errorCode"], &code))
		}
		if _, details := e["details"]; err != nil || !details || msg == "" || code == "" {
			f.t.Fatalf("GET /runtime%s: %d without the Runtime's error body: %s", path, a.code, clip(a.body))
		}
	}
	if a.code == http.StatusPartialContent {
		// servant-pagination sends Total-Count with every page.
		var page struct {
			Results []json.RawMessage `json:"results"`
		}
		n, err := strconv.Atoi(a.header.Get("Total-Count"))
		if err == nil {
			err = json.Unmarshal(a.body, &page)
		}
		if err != nil || n < len(page.Results) {
			f.t.Fatalf("GET /runtime%s: Total-Count %q for a page of %d", path, a.header.Get("Total-Count"), len(page.Results))
		}
	}
	loadGoldenSpec(f.t).check(f.t, req, a)
	loadViewSpec(f.t).check(f.t, req, a)
	return a
}

// The view's JSON, as a client reads it.
type (
	rtItem[T any] struct {
		Resource T                 `json:"resource"`
		Links    map[string]string `json:"links"`
	}
	rtList[T any] struct {
		Results []rtItem[T] `json:"results"`
	}
	rtBlock struct {
		SlotNo          uint64 `json:"slotNo"`
		BlockNo         uint64 `json:"blockNo"`
		BlockHeaderHash string `json:"blockHeaderHash"`
	}
	rtContract struct {
		ContractID       string                     `json:"contractId"`
		Policy           string                     `json:"roleTokenMintingPolicyId"`
		Version          string                     `json:"version"`
		Status           string                     `json:"status"`
		ContractStatus   string                     `json:"contractStatus"`
		Block            rtBlock                    `json:"block"`
		Tags             map[string]json.RawMessage `json:"tags"`
		Seq              int64                      `json:"seq"`
		Current          json.RawMessage            `json:"currentContract"`
		State            json.RawMessage            `json:"state"`
		UTxO             *string                    `json:"utxo"`
		UnclaimedPayouts []struct {
			PayoutID string `json:"payoutId"`
			Role     string `json:"role"`
		} `json:"unclaimedPayouts"`
	}
	rtTx struct {
		ContractID       string          `json:"contractId"`
		TransactionID    string          `json:"transactionId"`
		Seq              int64           `json:"seq"`
		UTxO             *string         `json:"utxo"`
		InputUTxO        string          `json:"inputUtxo"`
		InputContract    json.RawMessage `json:"inputContract"`
		InputState       json.RawMessage `json:"inputState"`
		OutputUTxO       *string         `json:"outputUtxo"`
		OutputContract   json.RawMessage `json:"outputContract"`
		OutputState      json.RawMessage `json:"outputState"`
		ConsumingTx      *string         `json:"consumingTx"`
		InvalidBefore    string          `json:"invalidBefore"`
		InvalidHereafter string          `json:"invalidHereafter"`
		Inputs           json.RawMessage `json:"inputs"`
		SemanticInput    struct {
			Interval struct {
				From int64 `json:"from"`
				To   int64 `json:"to"`
			} `json:"tx_interval"`
			Inputs json.RawMessage `json:"tx_inputs"`
		} `json:"reconstructedSemanticInput"`
		SemanticOutput struct {
			Contract json.RawMessage `json:"contract"`
			State    json.RawMessage `json:"state"`
			Error    json.RawMessage `json:"transaction_error"`
		} `json:"reconstructedSemanticOutput"`
		Payouts []struct {
			PayoutID string `json:"payoutId"`
		} `json:"payouts"`
	}
	rtPayout struct {
		PayoutID     string  `json:"payoutId"`
		ContractID   string  `json:"contractId"`
		Status       string  `json:"status"`
		WithdrawalID *string `json:"withdrawalId"`
		Role         struct {
			PolicyID  string `json:"policyId"`
			AssetName string `json:"assetName"`
		} `json:"role"`
		PayoutValidatorAddress string `json:"payoutValidatorAddress"`
	}
	rtWithdrawal struct {
		WithdrawalID string     `json:"withdrawalId"`
		Status       string     `json:"status"`
		Payouts      []rtPayout `json:"payouts"`
	}
)

var contentRangeRE = regexp.MustCompile(`^[a-zA-Z]+ [A-Za-z0-9%]+\.\.[A-Za-z0-9%]+$`)

// rtPages reads a whole list by following Next-Range from the first
// Range (empty: none), checking the paging headers of every page.
func rtPages[T any](f *fixture, path, field, first string, key func(*T) string) []rtItem[T] {
	f.t.Helper()
	var out []rtItem[T]
	rng := first
	for n := 0; ; n++ {
		if n > 10_000 {
			f.t.Fatal("paging does not end")
		}
		h := http.Header{}
		if rng != "" {
			h.Set("Range", rng)
		}
		a := f.rtGet(path, h, http.StatusPartialContent)
		if got := a.header.Get("Accept-Ranges"); got != field {
			f.t.Fatalf("Accept-Ranges %q, want %q", got, field)
		}
		var page rtList[T]
		a.decode(f.t, &page)
		if len(page.Results) > 0 {
			cr := a.header.Get("Content-Range")
			want := field + " " + strings.ReplaceAll(key(&page.Results[0].Resource), "#", "%23") + ".." +
				strings.ReplaceAll(key(&page.Results[len(page.Results)-1].Resource), "#", "%23")
			if cr != want || !contentRangeRE.MatchString(cr) {
				f.t.Fatalf("Content-Range %q, want %q", cr, want)
			}
		} else if a.header.Get("Content-Range") != "" {
			f.t.Fatal("Content-Range on an empty page")
		}
		out = append(out, page.Results...)
		rng = a.header.Get("Next-Range")
		if rng == "" {
			return out
		}
		if !strings.HasPrefix(rng, field+" ") {
			f.t.Fatalf("Next-Range %q", rng)
		}
	}
}
