package runtime

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/query/internal/apitest"
)

var update = flag.Bool("update", false, "write openapi.json from the golden document")

// TestOpenAPIDocument checks that the served document is the one made from
// the Runtime's golden document by viewDocument (with -update, writes it).
func TestOpenAPIDocument(t *testing.T) {
	golden, err := os.ReadFile("../../testdata/marlowe-runtime/openapi-1.0.0.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := viewDocument(golden)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("openapi.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(openAPIDocument, want) {
		t.Fatal("query/runtime/openapi.json is not the document viewDocument makes from the golden one: " +
			"go test ./query/runtime -run TestOpenAPIDocument -update")
	}
}

type object = map[string]any

func ref(name string) object { return object{"$ref": "#/components/schemas/" + name} }

const viewDescription = "The follower's Marlowe Runtime view: the read operations of the Marlowe Runtime 1.0.0 " +
	"REST API, answered from what the follower saw on chain, mounted at /runtime on the query port. It is the Runtime's " +
	"golden OpenAPI document (marlowe-runtime-web) with its write operations left out (the view answers them 405), " +
	"corrected where it does not say what the Runtime sends, and with the follower's extras.\n\n" +
	"Corrections: the document is OpenAPI 3.0 (it said 3.1.0 but is written in 3.0: boolean exclusiveMinimum), so " +
	"its tuples are arrays of their items' alternatives of the same length; a tag without a payload is null; Input " +
	"and Metadata are anyOf (their alternatives overlap: a merkleized input matches the merkleized notify, a hex " +
	"string is also text); the tip headers are JSON; errors have their body (message, errorCode, details) and every " +
	"status the view answers is listed (400 for a malformed id, 416 for a Range outside the list, 503); an empty roleCurrency on the contract list (the contracts without roles) is allowed.\n\n" +
	"Extras: minSeq on every read (wait until the projection applied that seq, 503 NotYetApplied after a bounded " +
	"wait), the native position headers (X-Marlowe-*) on every answer, details.code on every error (the native API's " +
	"error code), the follower's fields (on contracts: scriptVersion, contractStatus, address, seq, steps, lastSeq, " +
	"lastBlock, sourceId; on steps: seq, utxo, interval; on payouts: assets, block, transactionId, seq; on " +
	"withdrawals: seq, lastSeq), unrevealed on a source's adjacency and closure (the hashes the chain has not " +
	"revealed yet), and this document at /runtime/openapi.json. The resources the view writes name all their fields " +
	"(additionalProperties: false)."

// viewDocument makes the view's document from the Runtime's golden one.
func viewDocument(golden []byte) ([]byte, error) {
	var doc object
	if err := json.Unmarshal(golden, &doc); err != nil {
		return nil, err
	}
	doc["openapi"] = "3.0.3"
	info := doc["info"].(object)
	info["title"] = "Marlowe Runtime REST API: the follower's view"
	info["description"] = viewDescription
	doc["servers"] = []any{object{"url": Prefix, "description": "the follower's query port"}}
	comps := doc["components"].(object)
	schemas := comps["schemas"].(object)
	if err := correctSchemas(doc, schemas); err != nil {
		return nil, err
	}
	addExtras(schemas)
	comps["headers"] = positionHeaders()
	comps["parameters"] = object{"minSeq": object{"name": "minSeq", "in": "query",
		"description": "Wait until the projection has applied this seq (read-your-writes), up to a bounded time; 503 NotYetApplied after.",
		"schema":      object{"type": "integer", "minimum": 0}}}
	paths := object{}
	for path, item := range doc["paths"].(object) {
		get, ok := item.(object)["get"].(object)
		if !ok {
			continue // a write operation alone: the view answers 405
		}
		if err := correctOperation(path, get); err != nil {
			return nil, err
		}
		paths[path] = object{"get": get}
	}
	paths["/openapi.json"] = object{"get": object{"operationId": "getOpenAPI", "summary": "This document",
		"security": []any{}, "responses": object{"200": response("", object{"application/json": object{"schema": object{"type": "object"}}})}}}
	doc["paths"] = paths
	prune(doc, schemas)
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// correctSchemas makes the golden schemas say what the Runtime sends.
func correctSchemas(doc, schemas object) error {
	for _, name := range []string{"Input", "Metadata"} {
		s, ok := schemas[name].(object)
		if !ok || s["oneOf"] == nil {
			return fmt.Errorf("the golden document's %s is not a oneOf", name)
		}
		s["anyOf"] = s["oneOf"]
		delete(s, "oneOf")
	}
	apitest.WalkJSON(doc, func(x object) {
		if items, ok := x["items"].([]any); ok {
			x["items"] = object{"anyOf": items}
		}
		if tags, ok := x["tags"].(object); ok && tags["additionalProperties"] != nil {
			// null: nullable for OpenAPI 3.0 readers, enum for JSON Schema ones
			tags["additionalProperties"] = object{"anyOf": []any{tags["additionalProperties"],
				object{"enum": []any{nil}, "nullable": true}}, "nullable": true}
		}
	})
	return nil
}

// addExtras adds the follower's fields and the error body, and closes the
// resources the view writes to fields the document names.
func addExtras(schemas object) {
	block := ref("BlockHeader")
	integer := object{"type": "integer"}
	props := func(name string) object { return schemas[name].(object)["properties"].(object) }
	extra := func(name string, fields object) {
		p := props(name)
		for k, v := range fields {
			p[k] = v
		}
	}
	header := object{
		"scriptVersion":  object{"type": "string", "description": "The follower's: the Marlowe validator version (v1)."},
		"contractStatus": object{"type": "string", "enum": []any{"open", "closed"}, "description": "The follower's: open or closed."},
		"address":        object{"type": "string", "description": "The follower's: the Marlowe validator address (bech32)."},
		"seq":            object{"type": "integer", "description": "The follower's: the seq of the contract's creation."},
		"steps":          object{"type": "integer", "description": "The follower's: how many steps the contract made."},
		"lastSeq":        object{"type": "integer", "description": "The follower's: the seq of the contract's last change."},
		"lastBlock":      block,
	}
	extra("ContractHeader", header)
	extra("ContractState", header)
	extra("ContractState", object{"sourceId": object{"allOf": []any{ref("ContractSourceId")},
		"description": "The follower's: the contract source of the initial contract (GET /contracts/sources/{contractSourceId})."}})
	extra("TxHeader", object{"seq": object{"type": "integer", "description": "The follower's: the step's seq."}})
	extra("Tx", object{"seq": object{"type": "integer", "description": "The follower's: the step's seq."},
		"utxo": object{"allOf": []any{ref("TxOutRef")}, "description": "The follower's: the contract's output the step made (as outputUtxo)."},
		"interval": object{"type": "object", "description": "The follower's: the interval as the semantics see it (from, to: " +
			"POSIX ms, both inclusive) and as the ledger has it (invalidBefore, invalidHereafter: slots).",
			"properties": object{"from": integer, "to": integer, "invalidBefore": integer, "invalidHereafter": integer}}})
	payout := object{"assets": ref("Assets"), "block": block,
		"transactionId": object{"allOf": []any{ref("TxId")}, "description": "The follower's: the step that made the payout."},
		"seq":           object{"type": "integer", "description": "The follower's: the seq of that step."}}
	extra("PayoutHeader", payout)
	extra("PayoutState", payout)
	withdrawal := object{"seq": object{"type": "integer", "description": "The follower's: the seq of the withdrawal."},
		"lastSeq": object{"type": "integer", "description": "The follower's: the seq of its last record."}}
	extra("WithdrawalHeader", withdrawal)
	extra("Withdrawal", withdrawal)
	extra("ContractSourceIds", object{"unrevealed": object{"type": "array", "items": ref("ContractSourceId"),
		"description": "The follower's: the referenced hashes the chain has not revealed yet."}})
	for _, name := range []string{"ContractHeader", "ContractState", "TxHeader", "Tx", "PayoutHeader", "PayoutState",
		"WithdrawalHeader", "Withdrawal", "ContractSourceIds", "BlockHeader"} {
		schemas[name].(object)["additionalProperties"] = false
	}
	schemas["ApiError"] = object{"type": "object", "required": []any{"message", "errorCode", "details"},
		"properties": object{
			"message":   object{"type": "string"},
			"errorCode": object{"type": "string", "description": "The Runtime's error code (BadRequest, NotFound, ...)."},
			"details": object{"type": "object", "required": []any{"code"}, "description": "The follower's code (the native " +
				"API's, docs/query.md Errors) and what the Runtime says more (the interval error of /next).",
				"properties": object{"code": object{"type": "string"}}},
		}}
}

func positionHeaders() object {
	h := object{}
	for name, desc := range map[string]string{
		"X-Marlowe-Seq":              "The seq of the state the answer reflects.",
		"X-Marlowe-Block-Slot":       "The slot of that state's block.",
		"X-Marlowe-Block-No":         "The number of that state's block.",
		"X-Marlowe-Block-Hash":       "The hash of that state's block.",
		"X-Node-Tip-Block-No":        "The node's tip block number.",
		"X-Marlowe-Follower-Version": "The follower's version.",
	} {
		h[name] = object{"description": "The follower's: " + strings.ToLower(desc[:1]) + desc[1:], "schema": object{"type": "string"}}
	}
	return h
}

func response(desc string, content object) object {
	r := object{"description": desc}
	if content != nil {
		r["content"] = content
	}
	return r
}

// correctOperation gives an operation the follower's parameter, headers
// and error answers.
func correctOperation(path string, op object) error {
	responses := op["responses"].(object)
	list := false
	for code, r := range responses {
		resp := r.(object)
		if code[0] != '2' {
			continue
		}
		list = list || code == "206"
		headers, _ := resp["headers"].(object)
		if headers == nil {
			return fmt.Errorf("%s %s has no headers", path, code)
		}
		for name, h := range headers {
			if hh := h.(object); strings.HasSuffix(name, "-Tip") && hh["schema"] != nil {
				hh["content"] = object{"application/json": object{"schema": hh["schema"]}}
				delete(hh, "schema")
			}
		}
		for _, name := range []string{"X-Marlowe-Seq", "X-Marlowe-Block-Slot", "X-Marlowe-Block-No", "X-Marlowe-Block-Hash",
			"X-Node-Tip-Block-No", "X-Marlowe-Follower-Version"} {
			headers[name] = object{"$ref": "#/components/headers/" + name}
		}
	}
	if path == "/healthcheck" {
		return nil
	}
	params, _ := op["parameters"].([]any)
	for _, p := range params {
		if p := p.(object); path == "/contracts" && p["name"] == "roleCurrency" {
			p["allowEmptyValue"] = true // roleCurrency= : the contracts without roles
		}
	}
	op["parameters"] = append(params, object{"$ref": "#/components/parameters/minSeq"})
	errBody := object{"application/json": object{"schema": ref("ApiError")}}
	for code, desc := range map[string]string{
		"400": "A malformed id or parameter (BadRequest, invalidInterval).",
		"404": "Not found (NotFound, contractClosed).",
		"416": "A Range the list cannot satisfy: a start outside it (RangeNotSatisfiable).",
		"503": "minSeq not applied in time (NotYetApplied) or the store did not answer (StoreUnavailable); Retry-After.",
	} {
		if code == "416" && !list || code == "404" && !strings.Contains(path, "{") {
			continue
		}
		old, _ := responses[code].(object)
		if old != nil && old["description"] != "" {
			desc = old["description"].(string)
		}
		responses[code] = response(desc, errBody)
	}
	return nil
}

// prune removes the schemas no kept operation reaches.
func prune(doc, schemas object) {
	reached := map[string]bool{}
	var visit func(v any)
	visit = func(v any) {
		apitest.WalkJSON(v, func(x object) {
			r, ok := x["$ref"].(string)
			name, isSchema := strings.CutPrefix(r, "#/components/schemas/")
			if !ok || !isSchema || reached[name] {
				return
			}
			reached[name] = true
			visit(schemas[name])
		})
	}
	visit(doc["paths"])
	visit(doc["components"].(object)["headers"])
	for name := range schemas {
		if !reached[name] {
			delete(schemas, name)
		}
	}
}
