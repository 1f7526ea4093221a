// The API page's reading of OpenAPI documents: the service's own
// (query/openapi.json) whole, and the forms a schema takes in words.
import test from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { constraints, matches, operations, refName, resolve, schemas, typeOf } from "../static/js/openapi.js";

const DOC = JSON.parse(fs.readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), "../../openapi.json"), "utf8"));
const text = (parts) => parts.map((x) => (typeof x === "string" ? x : `<${x.ref}>`)).join("");

test("a schema in a few words", () => {
  assert.equal(text(typeOf({ type: "string", format: "date-time" })), "string (date-time)");
  assert.equal(text(typeOf({ type: "array", items: { $ref: "#/components/schemas/TxOutRef" } })), "array of <TxOutRef>");
  assert.equal(text(typeOf({ type: "string", enum: ["open", "closed"] })), '"open" | "closed"');
  assert.equal(text(typeOf({ oneOf: [{ $ref: "#/components/schemas/A" }, { type: "integer" }], nullable: true })), "one of <A> | integer or null");
  assert.equal(text(typeOf({ type: "object", additionalProperties: { type: "integer" } })), "map of integer");
  assert.equal(text(typeOf(undefined)), "any");
  assert.deepEqual(refName("#/components/schemas/a~1b"), { kind: "schemas", name: "a/b" });
  assert.equal(constraints({ minimum: 1, maximum: 1000, default: 100 }), "1 to 1000, default 100");
  assert.equal(constraints({ maxItems: 100, pattern: "^[0-9a-f]{56}$" }), "at most 100 values, pattern ^[0-9a-f]{56}$");
});

test("every operation of the service's document, with its parameters and answers", () => {
  const ops = operations(DOC);
  const paths = new Set(ops.map((o) => o.path));
  for (const p of Object.keys(DOC.paths)) assert.ok(paths.has(p), p);
  const list = ops.find((o) => o.path === "/contracts" && o.method === "GET");
  assert.ok(list.parameters.some((p) => p.name === "minSeq"), "shared parameters ($ref) are resolved");
  assert.ok(list.parameters.some((p) => p.name === "tag" && p.in === "query"));
  assert.ok(list.responses.some((r) => r.status === "200" && r.content.length > 0));
  assert.ok(ops.every((o) => o.responses.length > 0 && o.responses.every((r) => typeof r.description === "string")));
  // Every $ref the operations name is a schema of the document.
  const names = new Set(schemas(DOC).map((s) => s.name));
  const refs = JSON.stringify(DOC.paths).match(/#\/components\/schemas\/[^"]+/g) || [];
  for (const r of refs) assert.ok(names.has(refName(r).name), r);
  assert.ok(resolve(DOC, { $ref: refs[0] }));
});

test("the search finds operations by path, method, word or parameter", () => {
  const ops = operations(DOC);
  assert.ok(ops.filter((o) => matches(o, "payouts")).every((o) => /payout/i.test(o.path + o.summary + o.description + o.parameters.map((p) => p.name).join())));
  assert.ok(ops.filter((o) => matches(o, "minSeq")).length >= 5);
  assert.equal(ops.filter((o) => matches(o, "")).length, ops.length);
  assert.equal(ops.filter((o) => matches(o, "no-such-thing-anywhere")).length, 0);
});
