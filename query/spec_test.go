package query_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/marlowe-follower/follower/query"
	"github.com/marlowe-follower/follower/query/internal/apitest"
)

// spec validates requests and answers against an OpenAPI document and
// records which operations answered 2xx. Three documents are checked:
// the native API's (/openapi.json), the view's (/runtime/openapi.json)
// and the Runtime's golden document the view's is made from.
type spec struct {
	doc    *openapi3.T
	router routers.Router
	// complete: the document lists every status the API answers and
	// every parameter it takes (the golden document lists neither).
	complete bool
	// bodies, when set, validates answers' bodies as JSON Schema (draft 4,
	// the dialect of the Runtime's documents) in place of kin-openapi,
	// whose oneOf of recursive alternatives (a Marlowe contract) takes
	// time exponential in the contract's depth.
	bodies  *jsonschema.Compiler
	mu      sync.Mutex
	hit     map[string]bool
	schemas map[string]*jsonschema.Schema
}

var (
	specOnce, viewSpecOnce, goldenSpecOnce sync.Once
	theSpec, theViewSpec, theGoldenSpec    *spec
	specErr, viewSpecErr, goldenSpecErr    error
)

// loadSpec is the native API's document.
func loadSpec(t testing.TB) *spec {
	specOnce.Do(func() { theSpec, specErr = newSpec(query.OpenAPI(), nil, true) })
	if specErr != nil {
		t.Fatalf("the OpenAPI document: %v", specErr)
	}
	return theSpec
}

// loadViewSpec is the Runtime view's document, served at
// /runtime/openapi.json.
func loadViewSpec(t testing.TB) *spec {
	viewSpecOnce.Do(func() {
		var bodies any
		if viewSpecErr = json.Unmarshal(query.RuntimeOpenAPI(), &bodies); viewSpecErr == nil {
			theViewSpec, viewSpecErr = newSpec(query.RuntimeOpenAPI(), bodies, true)
		}
	})
	if viewSpecErr != nil {
		t.Fatalf("the view's OpenAPI document: %v", viewSpecErr)
	}
	return theViewSpec
}

// loadGoldenSpec is the Marlowe Runtime 1.0.0's own golden document
// (testdata/marlowe-runtime, copied unchanged), read with the corrections
// a validator needs to read it as the Runtime means it (the view's
// document makes them too, and says why): tag values may be null; Input
// is anyOf; the tip headers are JSON; for kin-openapi only (bodies are
// JSON Schema's): 3.0.3 rather than 3.1.0, tuples as arrays of their
// items' alternatives. None loosens what it says but the tuples' order.
func loadGoldenSpec(t testing.TB) *spec {
	goldenSpecOnce.Do(func() { theGoldenSpec, goldenSpecErr = readGoldenSpec() })
	if goldenSpecErr != nil {
		t.Fatalf("the Runtime's OpenAPI document: %v", goldenSpecErr)
	}
	return theGoldenSpec
}

func readGoldenSpec() (*spec, error) {
	raw, err := os.ReadFile("../testdata/marlowe-runtime/openapi-1.0.0.json")
	if err != nil {
		return nil, err
	}
	var bodies, kinDoc map[string]any
	if err := errors.Join(json.Unmarshal(raw, &bodies), json.Unmarshal(raw, &kinDoc)); err != nil {
		return nil, err
	}
	input := bodies["components"].(map[string]any)["schemas"].(map[string]any)["Input"].(map[string]any)
	input["anyOf"] = input["oneOf"]
	delete(input, "oneOf")
	apitest.WalkJSON(bodies, func(x map[string]any) {
		if tags, ok := x["tags"].(map[string]any); ok {
			if ap, ok := tags["additionalProperties"]; ok {
				tags["additionalProperties"] = map[string]any{"anyOf": []any{ap, map[string]any{"type": "null"}}}
			}
		}
	})
	apitest.WalkJSON(kinDoc, func(x map[string]any) {
		if items, ok := x["items"].([]any); ok {
			x["items"] = map[string]any{"anyOf": items}
		}
		if headers, ok := x["headers"].(map[string]any); ok {
			for name, h := range headers {
				if h, ok := h.(map[string]any); ok && strings.HasSuffix(name, "-Tip") && h["schema"] != nil {
					h["content"] = map[string]any{"application/json": map[string]any{"schema": h["schema"]}}
					delete(h, "schema")
				}
			}
		}
	})
	kinDoc["openapi"] = "3.0.3"
	// Its servers are the Runtime's hosts; the view is at /runtime.
	kinDoc["servers"] = []any{map[string]any{"url": query.RuntimePrefix}}
	kinRaw, err := json.Marshal(kinDoc)
	if err != nil {
		return nil, err
	}
	return newSpec(kinRaw, bodies, false)
}

const bodiesURL = "file:///openapi.json"

func newSpec(raw []byte, bodies any, complete bool) (*spec, error) {
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err == nil {
		err = doc.Validate(context.Background(), openapi3.DisableExamplesValidation())
	}
	if err != nil {
		return nil, err
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	s := &spec{doc: doc, router: router, complete: complete, hit: map[string]bool{}, schemas: map[string]*jsonschema.Schema{}}
	if bodies != nil {
		s.bodies = jsonschema.NewCompiler()
		s.bodies.DefaultDraft(jsonschema.Draft4)
		if err := s.bodies.AddResource(bodiesURL, bodies); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *spec) check(t testing.TB, req *http.Request, a *answer) {
	t.Helper()
	route, params, err := s.router.FindRoute(req)
	if err != nil {
		if a.code == http.StatusNotFound || a.code == http.StatusMethodNotAllowed {
			return // a path the API does not have
		}
		if s == theGoldenSpec {
			if _, _, ours := loadViewSpec(t).router.FindRoute(req); ours == nil {
				return // an extra of the view: its own document checks it
			}
		}
		t.Fatalf("GET %s: not in the OpenAPI document: %v", req.URL, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{MultiError: true}}
	if s.complete && a.code < 400 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Fatalf("GET %s: the request does not match the OpenAPI document: %v", req.URL, err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: a.code, Header: a.header,
		Options: &openapi3filter.Options{IncludeResponseStatus: s.complete || a.code < 400, MultiError: true,
			ExcludeResponseBody: s.bodies != nil}}
	out.SetBodyBytes(a.body)
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Fatalf("GET %s: the %d answer does not match the OpenAPI document: %v\n%s", req.URL, a.code, err, clip(a.body))
	}
	if s.bodies != nil {
		s.checkBody(t, req, route, a)
	}
	if a.code < 300 {
		s.mu.Lock()
		s.hit[route.Method+" "+route.Path] = true
		s.mu.Unlock()
	}
}

// checkBody validates an answer's Content-Type and body as JSON Schema.
func (s *spec) checkBody(t testing.TB, req *http.Request, route *routers.Route, a *answer) {
	t.Helper()
	resp := route.Operation.Responses.Status(a.code)
	if resp == nil || len(resp.Value.Content) == 0 {
		return
	}
	ct := a.header.Get("Content-Type")
	if resp.Value.Content[ct] == nil {
		t.Fatalf("GET %s: Content-Type %q is not the document's", req.URL, ct)
	}
	if resp.Value.Content[ct].Schema == nil || len(a.body) == 0 {
		return
	}
	ptr := "#/paths/" + jsonPointerToken(route.Path) + "/" + strings.ToLower(route.Method) + "/responses/" +
		strconv.Itoa(a.code) + "/content/" + jsonPointerToken(ct) + "/schema"
	s.mu.Lock()
	sch, ok := s.schemas[ptr]
	if !ok {
		var err error
		if sch, err = s.bodies.Compile(bodiesURL + ptr); err != nil {
			s.mu.Unlock()
			t.Fatalf("the document's schema of GET %s %d: %v", route.Path, a.code, err)
		}
		s.schemas[ptr] = sch
	}
	s.mu.Unlock()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(a.body))
	if err != nil {
		t.Fatalf("GET %s: %v", req.URL, err)
	}
	if err := sch.Validate(v); err != nil {
		t.Fatalf("GET %s: the %d answer's body does not match the OpenAPI document: %v\n%s", req.URL, a.code, err, clip(a.body))
	}
}

func jsonPointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
