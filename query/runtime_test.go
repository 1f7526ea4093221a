package query_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/santhosh-tekuri/jsonschema/v6"

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

// rtSpec is the golden document. Bodies are validated as JSON Schema
// (draft 4, the dialect the document's schemas are written in) with
// santhosh-tekuri/jsonschema; status codes and headers with kin-openapi,
// which also finds the route. Corrections let the validators read the
// document as the Runtime means it; none loosens what it says:
//   - a tag without a payload is null (the Runtime's DTO writes
//     `maybe (Metadata Null) toDTO` for each tag), which the document's
//     tags (an object of Metadata) do not allow: tag values may be null;
//   - an Input is oneOf alternatives that overlap: a merkleized notify
//     requires only continuation_hash and merkleized_continuation, which
//     every merkleized input has, so a merkleized deposit or choice matches
//     two of them; Input is read as anyOf;
//   - the Runtime sends its tip headers (X-Node-Tip, X-Runtime-Chain-Tip,
//     X-Runtime-Tip) as JSON, which the document describes as objects in
//     the default "simple" header style (comma-separated keys and values):
//     kin-openapi reads them as application/json with the same schema;
//   - for kin-openapi only (it does not see the bodies): the document says
//     "openapi": "3.1.0" but is written in 3.0 (boolean exclusiveMinimum),
//     so it is read as 3.0.3, and its tuples (items: [A, B], which OpenAPI
//     3.0 lacks) as items: {anyOf: [A, B]}.
type rtSpec struct {
	doc      *openapi3.T
	router   routers.Router
	compiler *jsonschema.Compiler
	mu       sync.Mutex
	hit      map[string]bool
	schemas  map[string]*jsonschema.Schema
}

var (
	rtSpecOnce sync.Once
	theRTSpec  *rtSpec
	rtSpecErr  error
)

const rtSchemaURL = "file:///marlowe-runtime-1.0.0.json"

func loadRuntimeSpec(t testing.TB) *rtSpec {
	rtSpecOnce.Do(func() { theRTSpec, rtSpecErr = readRuntimeSpec() })
	if rtSpecErr != nil {
		t.Fatalf("the Runtime's OpenAPI document: %v", rtSpecErr)
	}
	return theRTSpec
}

func readRuntimeSpec() (*rtSpec, error) {
	raw, err := os.ReadFile("../testdata/marlowe-runtime/openapi-1.0.0.json")
	if err != nil {
		return nil, err
	}
	var schemaDoc any
	if err := json.Unmarshal(raw, &schemaDoc); err != nil {
		return nil, err
	}
	input := schemaDoc.(map[string]any)["components"].(map[string]any)["schemas"].(map[string]any)["Input"].(map[string]any)
	input["anyOf"] = input["oneOf"]
	delete(input, "oneOf")
	walkJSON(schemaDoc, func(x map[string]any) {
		if tags, ok := x["tags"].(map[string]any); ok {
			if ap, ok := tags["additionalProperties"]; ok {
				tags["additionalProperties"] = map[string]any{"anyOf": []any{ap, map[string]any{"type": "null"}}}
			}
		}
	})
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	if err := c.AddResource(rtSchemaURL, schemaDoc); err != nil {
		return nil, err
	}
	// kin-openapi's copy.
	var kinDoc any
	if err := json.Unmarshal(raw, &kinDoc); err != nil {
		return nil, err
	}
	walkJSON(kinDoc, func(x map[string]any) {
		if items, ok := x["items"].([]any); ok {
			x["items"] = map[string]any{"anyOf": items}
		}
	})
	kinDoc.(map[string]any)["openapi"] = "3.0.3"
	kinRaw, err := json.Marshal(kinDoc)
	if err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromData(kinRaw)
	if err != nil {
		return nil, err
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, resp := range op.Responses.Map() {
				for name, h := range resp.Value.Headers {
					if strings.HasSuffix(name, "-Tip") && h.Value.Schema != nil {
						h.Value.Content = openapi3.NewContentWithJSONSchemaRef(h.Value.Schema)
						h.Value.Schema = nil
					}
				}
			}
		}
	}
	// Its servers are the Runtime's hosts; any host is ours.
	doc.Servers = nil
	if err := doc.Validate(context.Background(), openapi3.DisableExamplesValidation()); err != nil {
		return nil, err
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &rtSpec{doc: doc, router: router, compiler: c, hit: map[string]bool{}, schemas: map[string]*jsonschema.Schema{}}, nil
}

// walkJSON calls fn on every object of a JSON document.
func walkJSON(v any, fn func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		fn(x)
		for _, e := range x {
			walkJSON(e, fn)
		}
	case []any:
		for _, e := range x {
			walkJSON(e, fn)
		}
	}
}

// bodySchema compiles the schema of an operation's answer.
func (s *rtSpec) bodySchema(path, method string, code int, contentType string) (*jsonschema.Schema, error) {
	ptr := "#/paths/" + jsonPointerToken(path) + "/" + strings.ToLower(method) + "/responses/" + strconv.Itoa(code) +
		"/content/" + jsonPointerToken(contentType) + "/schema"
	s.mu.Lock()
	defer s.mu.Unlock()
	if sch, ok := s.schemas[ptr]; ok {
		return sch, nil
	}
	sch, err := s.compiler.Compile(rtSchemaURL + ptr)
	if err != nil {
		return nil, err
	}
	s.schemas[ptr] = sch
	return sch, nil
}

func jsonPointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

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
	res, err := f.client.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		f.t.Fatal(err)
	}
	a := &answer{code: res.StatusCode, header: res.Header, body: body}
	if want != 0 && a.code != want {
		f.t.Fatalf("GET /runtime%s: %d, want %d: %s", path, a.code, want, clip(body))
	}
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
		err := json.Unmarshal(body, &e)
		var msg, code string
		if err == nil {
			err = errors.Join(json.Unmarshal(e["message"], &msg), json.Unmarshal(e["errorCode"], &code))
		}
		if _, details := e["details"]; err != nil || !details || msg == "" || code == "" {
			f.t.Fatalf("GET /runtime%s: %d without the Runtime's error body: %s", path, a.code, clip(body))
		}
	}
	if a.code == http.StatusPartialContent {
		// servant-pagination sends Total-Count with every page.
		var page struct {
			Results []json.RawMessage `json:"results"`
		}
		n, err := strconv.Atoi(a.header.Get("Total-Count"))
		if err == nil {
			err = json.Unmarshal(body, &page)
		}
		if err != nil || n < len(page.Results) {
			f.t.Fatalf("GET /runtime%s: Total-Count %q for a page of %d", path, a.header.Get("Total-Count"), len(page.Results))
		}
	}
	loadRuntimeSpec(f.t).check(f.t, req, a)
	return a
}

// check validates an answer of the view against the Runtime's document.
func (s *rtSpec) check(t testing.TB, req *http.Request, a *answer) {
	t.Helper()
	// The document's paths are the Runtime's, without our prefix.
	r := req.Clone(context.Background())
	r.URL.Path = strings.TrimPrefix(r.URL.Path, query.RuntimePrefix)
	r.URL.RawPath = strings.TrimPrefix(r.URL.RawPath, query.RuntimePrefix)
	route, params, err := s.router.FindRoute(r)
	if err != nil {
		if a.code == http.StatusNotFound || a.code == http.StatusMethodNotAllowed {
			return
		}
		t.Fatalf("GET %s: not in the Runtime's document: %v", req.URL, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{MultiError: true}}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: a.code, Header: a.header,
		Options: &openapi3filter.Options{IncludeResponseStatus: a.code < 400, MultiError: true, ExcludeResponseBody: true}}
	out.SetBodyBytes(a.body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Fatalf("GET %s: the %d answer does not match the Runtime's document: %v\n%s", req.URL, a.code, err, clip(a.body))
	}
	if resp := route.Operation.Responses.Status(a.code); resp != nil && len(resp.Value.Content) > 0 {
		ct := a.header.Get("Content-Type")
		if resp.Value.Content[ct] == nil {
			t.Fatalf("GET %s: Content-Type %q, the document has %v", req.URL, ct, slices.Collect(maps.Keys(resp.Value.Content)))
		}
		if resp.Value.Content[ct].Schema != nil && len(a.body) > 0 {
			sch, err := s.bodySchema(route.Path, route.Method, a.code, ct)
			if err != nil {
				t.Fatalf("the document's schema of GET %s %d: %v", route.Path, a.code, err)
			}
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(a.body))
			if err != nil {
				t.Fatalf("GET %s: %v", req.URL, err)
			}
			if err := sch.Validate(v); err != nil {
				t.Fatalf("GET %s: the %d answer's body does not match the Runtime's document: %v\n%s", req.URL, a.code, err, clip(a.body))
			}
		}
	}
	if a.code < 300 {
		s.mu.Lock()
		s.hit[route.Method+" "+route.Path] = true
		s.mu.Unlock()
	}
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
