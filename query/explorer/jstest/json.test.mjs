// The lossless JSON parser, formatting and the Prometheus text reader.
import test from "node:test";
import assert from "node:assert/strict";
import { big, canonical, parse, stringify } from "../static/js/json.js";
import { ada, amount, assets, duration, learnClock, relative, roleName, short, slotTime } from "../static/js/format.js";
import { eta, parseMetrics, rate } from "../static/js/metrics.js";

test("integers beyond 2^53 stay exact; everything else as JSON.parse", () => {
  const text = '{"a":10000000000000009999999999998975999999999998976,"b":-9007199254740993,"c":9007199254740991,"d":1.5e3,"e":"x\\"y\\u00e9","f":[true,false,null,{}],"g":[]}';
  const v = parse(text);
  assert.equal(v.a, 10000000000000009999999999998975999999999998976n);
  assert.equal(v.b, -9007199254740993n);
  assert.equal(v.c, 9007199254740991);
  assert.equal(v.d, 1500);
  assert.equal(v.e, 'x"yé');
  assert.deepEqual(v.f, [true, false, null, {}]);
  assert.equal(stringify(v), '{"a":10000000000000009999999999998975999999999998976,"b":-9007199254740993,"c":9007199254740991,"d":1500,"e":"x\\"yé","f":[true,false,null,{}],"g":[]}');
  // Indented too (the contract page's JSON view): the same numbers, exact.
  assert.equal(stringify({ a: [2n ** 70n], b: -(2n ** 64n) }, 2), '{\n  "a": [\n    1180591620717411303424\n  ],\n  "b": -18446744073709551616\n}');
  assert.deepEqual(parse(stringify(v, 2)), v);
  for (const t of ['{"k": [1, 2 ,3 ] }', "0", '"\\\\"', '"a\\\\"', "-0.5", '{"__proto__":1}']) assert.deepEqual(parse(t), JSON.parse(t), t);
  for (const bad of ["{", "[1,]", "01x", "tru", '"abc', "1 2", ""]) assert.throws(() => parse(bad), SyntaxError, bad);
  assert.equal(canonical({ b: 1, a: [2n ** 70n, { d: 1, c: 2 }] }), '{"a":[1180591620717411303424,{"c":2,"d":1}],"b":1}');
  assert.equal(big(5), 5n);
  assert.equal(parse("123456789012345678901"), 123456789012345678901n, "a bare number");
  assert.deepEqual(parse('{"s":"x: 12345678901234567890","n":[1,2]}'), { s: "x: 12345678901234567890", n: [1, 2] }, "digits in a string");
  assert.deepEqual(parse('{"h":"1234567890123456789012345678901234567890123456789012345678901234"}'), { h: "1234567890123456789012345678901234567890123456789012345678901234" });
});

test("formatting", () => {
  assert.equal(ada(0), "0");
  assert.equal(ada(1), "0.000001");
  assert.equal(ada(-2500000), "-2.5");
  assert.equal(ada(45000000000000000n), "45,000,000,000");
  assert.equal(amount(1234, { currency_symbol: "ab", token_name: "T" }), "1234 T");
  assert.equal(assets({ lovelace: 3000000, tokens: { ab: { T: "2", "\u00000xdead": "1" } } }), "3 ADA, 2 T, 1 0xdead");
  assert.equal(assets({ lovelace: 0, tokens: {} }), "nothing");
  assert.equal(roleName(""), "“” (empty role name)");
  assert.equal(short("0123456789abcdef0123", 4, 4), "0123…0123");
  assert.equal(relative(10000, 0), "in 10 seconds");
  assert.equal(relative(0, 3 * 24 * 3600e3), "3 days ago");
  assert.equal(relative(500, 0), "now");
  assert.equal(duration(3725), "1 h 2 min");
  assert.equal(duration(42), "42 s");
  assert.equal(slotTime("devnet", 1000000000), 0);
  assert.equal(slotTime("mainnet", 4492800), 1596059091000);
  assert.equal(slotTime("elsewhere", 1), null);
  // Any other network's clock, as /status gives it.
  learnClock("magic-4242", { zeroSlot: 0, zeroTimeMillis: 1700000000000, slotLengthMillis: 200 });
  assert.equal(slotTime("magic-4242", 10), 1700000002000);
  learnClock("broken", { zeroSlot: 0, zeroTimeMillis: 0, slotLengthMillis: 0 });
  assert.equal(slotTime("broken", 1), null);
});

test("Prometheus text and rates", () => {
  const m = parseMetrics([
    "# HELP marlowe_blocks_total Blocks.", "# TYPE marlowe_blocks_total counter", "marlowe_blocks_total 1268",
    'marlowe_query_request_duration_seconds_count{code="200",route="GET /contracts"} 3',
    'marlowe_query_request_duration_seconds_count{code="404",route="other"} 2',
    "marlowe_chain_slot 2.4940268e+07", "weird_inf +Inf", "",
  ].join("\n"));
  assert.equal(m.get("marlowe_blocks_total"), 1268);
  assert.equal(m.get("marlowe_chain_slot"), 24940268);
  assert.equal(m.get("marlowe_query_request_duration_seconds_count"), 5);
  assert.equal(m.series.get('marlowe_query_request_duration_seconds_count{code="404",route="other"}'), 2);
  assert.equal(m.get("weird_inf"), 0, "infinities are not summed");
  const a = { at: 0, metrics: new Map([["x", 10]]) };
  const b = { at: 2000, metrics: new Map([["x", 30]]) };
  assert.equal(rate(a, b, "x"), 10);
  assert.equal(rate(b, { at: 3000, metrics: new Map([["x", 0]]) }, "x"), 0, "a counter reset is not a negative rate");
  assert.equal(rate(null, b, "x"), null);
  assert.equal(eta(100, 60, 10), 2);
  assert.equal(eta(0, 60), null);
  assert.equal(eta(100, 5, 5), null);
});
