// Inputs, actions, values and observations in words: every input kind,
// every construct, and every input of the reference traces.
import test from "node:test";
import assert from "node:assert/strict";
import { action, input, inputKind, noInputs, observation, payment, payout, quantity, reachedTimeout, UNKNOWN, value } from "../static/js/words.js";
import { paths } from "./reference.mjs";

const ada = { currency_symbol: "", token_name: "" };
const globe = { currency_symbol: "8bb3b343d8e404472337966a722150048c768d0a92a9813596c5338d", token_name: "Globe" };
const alice = { role_token: "alice" };
const bob = { role_token: "bob" };
const addr = { address: "addr_test1vrssw4edcts00kk6lp7p5n64666m23tpprqaarmdwkaq69gfvqnpz" };

test("a deposit into another party's account", () => {
  assert.equal(input({ input_from_party: alice, that_deposits: 100000000, of_token: ada, into_account: bob }), "alice deposits 100 ADA into bob’s account");
});

test("a deposit into one's own account, fractions of ADA, native tokens, addresses", () => {
  assert.equal(input({ input_from_party: alice, that_deposits: 1500000, of_token: ada, into_account: alice }), "alice deposits 1.5 ADA into their own account");
  assert.equal(input({ input_from_party: bob, that_deposits: 500, of_token: globe, into_account: alice }), "bob deposits 500 Globe into alice’s account");
  assert.equal(input({ input_from_party: addr, that_deposits: 2000000, of_token: ada, into_account: bob }), "addr_test1vr…fvqnpz deposits 2 ADA into bob’s account");
  assert.equal(input({ input_from_party: alice, that_deposits: 12345678901234567890123n, of_token: ada, into_account: bob }),
    "alice deposits 12,345,678,901,234,567.890123 ADA into bob’s account");
  assert.equal(input({ input_from_party: alice, that_deposits: 7, of_token: { currency_symbol: globe.currency_symbol, token_name: "" }, into_account: bob }),
    "alice deposits 7 token 8bb3b3…338d into bob’s account");
});

test("a choice, big numbers exact", () => {
  assert.equal(input({ for_choice_id: { choice_name: "Price", choice_owner: { role_token: "Oracle" } }, input_that_chooses_num: 42 }), "Oracle chooses 42 for “Price”");
  assert.equal(input({ for_choice_id: { choice_name: "p", choice_owner: alice }, input_that_chooses_num: 10000000000000009999999999998975999999999998976n }),
    "alice chooses 10000000000000009999999999998975999999999998976 for “p”");
  assert.equal(input({ for_choice_id: { choice_name: "neg", choice_owner: alice }, input_that_chooses_num: -3 }), "alice chooses -3 for “neg”");
});

test("a notify", () => {
  assert.equal(input("input_notify"), "a notification: the contract is told to check its condition");
  assert.equal(inputKind("input_notify"), "notify");
});

test("merkleized inputs say which continuation they reveal", () => {
  const h = "748bd13901602232f8f81c351181759d29d25fad14ed20d51686de1e7f4be91a";
  assert.equal(input({ input_from_party: alice, that_deposits: 75000000, of_token: ada, into_account: alice, continuation_hash: h, merkleized_continuation: "close" }),
    "alice deposits 75 ADA into their own account, revealing the merkleized continuation 748bd139…e91a");
  assert.equal(input({ for_choice_id: { choice_name: "c", choice_owner: bob }, input_that_chooses_num: 0, continuation_hash: h }),
    "bob chooses 0 for “c”, revealing the merkleized continuation 748bd139…e91a");
  assert.equal(input({ continuation_hash: h, merkleized_continuation: "close" }),
    "a notification: the contract is told to check its condition, revealing the merkleized continuation 748bd139…e91a");
  assert.equal(inputKind({ continuation_hash: h }), "notify");
  assert.equal(inputKind({ input_from_party: alice, that_deposits: 1, of_token: ada, into_account: alice, continuation_hash: h }), "deposit");
});

test("an input that is not Marlowe is said so", () => {
  assert.equal(input({ bogus: 1 }), "an input this page cannot read");
  assert.equal(inputKind({ bogus: 1 }), "unknown");
});

test("a step without inputs explains the deadline it passed", () => {
  const when = { when: [], timeout: 1704067200000, timeout_continuation: "close" };
  assert.equal(noInputs(when, { from: 1704067200000, to: 1704067200001 }, { timeZone: "UTC" }),
    "no inputs: the deadline of 1 Jan 2024, 00:00:00 UTC had passed, so the contract moved on");
  assert.match(noInputs(null, { from: 1 }), /^no inputs: the contract moved on by itself/);
  assert.equal(reachedTimeout({ let: "x", be: 1, then: { pay: 1, from_account: alice, to: { party: bob }, token: ada, then: when } }), 1704067200000);
  assert.equal(reachedTimeout({ if: true, then: when, else: "close" }), null);
  assert.equal(reachedTimeout("close"), null);
});

test("every value", () => {
  const cases = [
    [5, "5"],
    [123456789012345678901234567890n, "123456789012345678901234567890"],
    [{ amount_of_token: ada, in_account: alice }, "ADA in alice’s account"],
    [{ negate: 3 }, "−3"],
    [{ add: 1, and: { multiply: 2, times: 3 } }, "1 + (2 × 3)"],
    [{ value: 10, minus: { divide: 9, by: 3 } }, "10 − (9 ÷ 3)"],
    [{ value_of_choice: { choice_name: "Price", choice_owner: { role_token: "Oracle" } } }, "the choice “Price” by Oracle"],
    ["time_interval_start", "the interval’s start"],
    ["time_interval_end", "the interval’s end"],
    [{ use_value: "x" }, "the value “x”"],
    [{ if: true, then: 1, else: 2 }, "(if true then 1 else 2)"],
    [{ negate: { add: 1, and: 2 } }, "−(1 + 2)"],
    [{ nonsense: 1 }, UNKNOWN],
  ];
  for (const [v, want] of cases) assert.equal(value(v), want, JSON.stringify(v, (_, x) => (typeof x === "bigint" ? String(x) : x)));
});

test("every observation", () => {
  const c = { choice_name: "c", choice_owner: alice };
  const cases = [
    [true, "true"],
    [false, "false"],
    [{ both: true, and: { either: false, or: true } }, "true and (false or true)"],
    [{ not: { chose_something_for: c } }, "not “c” by alice has been made"],
    [{ value: 1, ge_than: 2 }, "1 ≥ 2"],
    [{ value: 1, gt: 2 }, "1 > 2"],
    [{ value: 1, lt: 2 }, "1 < 2"],
    [{ value: 1, le_than: 2 }, "1 ≤ 2"],
    [{ value: 1, equal_to: 2 }, "1 = 2"],
    [{ nonsense: true }, UNKNOWN],
  ];
  for (const [o, want] of cases) assert.equal(observation(o), want);
});

test("every action", () => {
  assert.equal(action({ party: alice, deposits: 100000000, of_token: ada, into_account: bob }), "alice deposits 100 ADA into bob’s account");
  assert.equal(action({ party: alice, deposits: { negate: { negate: 100 } }, of_token: ada, into_account: alice }), "alice deposits −(−100) (in lovelace) into their own account");
  assert.equal(action({ party: alice, deposits: { use_value: "n" }, of_token: globe, into_account: alice }), "alice deposits the value “n” (in Globe) into their own account");
  assert.equal(action({ for_choice: { choice_name: "Price", choice_owner: bob }, choose_between: [{ from: 1, to: 5 }] }), "bob chooses between 1 and 5 for “Price”");
  assert.equal(action({ for_choice: { choice_name: "x", choice_owner: bob }, choose_between: [{ from: 0, to: 0 }, { from: 2, to: 2 }, { from: 4, to: 9 }] }), "bob chooses 0, 2 or between 4 and 9 for “x”");
  assert.equal(action({ notify_if: true }), "someone notifies the contract");
  assert.equal(action({ notify_if: { value: "time_interval_start", gt: 5 } }), "someone notifies the contract when the interval’s start > 5");
});

test("payments and payouts", () => {
  assert.equal(payment({ amount: 30000000, payment_from: { role_token: "" }, to: { party: { role_token: "" } }, token: ada }),
    "30 ADA from “” (empty role name)’s account to “” (empty role name)");
  assert.equal(payment({ amount: 5, payment_from: alice, to: { account: bob }, token: globe }), "5 Globe from alice’s account to bob’s account");
  assert.equal(payout({ role: "bob", assets: { lovelace: 2000000, tokens: {} } }), "2 ADA to bob (a role payout)");
  assert.equal(payout({ address: addr.address, assets: { lovelace: 0, tokens: { [globe.currency_symbol]: { Globe: "3" } } } }), "3 Globe to addr_test1vr…fvqnpz");
  assert.equal(quantity(3, globe), "3 Globe");
  assert.equal(quantity({ amount_of_token: globe, in_account: alice }, globe), "all the Globe in alice’s account");
  assert.equal(quantity({ amount_of_token: ada, in_account: alice }, globe), "ADA in alice’s account (in Globe)");
});

test("every input of the reference traces reads as a sentence", () => {
  const kinds = new Set();
  let n = 0;
  for (const { name, paths: ps } of paths()) {
    for (const p of ps) {
      for (const t of p.transactions) {
        for (const i of t.input.tx_inputs) {
          const s = input(i);
          kinds.add(inputKind(i));
          assert.ok(!s.includes(UNKNOWN) && s !== "an input this page cannot read", `${name}: ${s}`);
          assert.match(s, /^(.+ deposits .+ into .+|.+ chooses -?\d+ for “.*”|a notification: .*)$/, `${name}: ${s}`);
          n++;
        }
        for (const pay of t.output.payments || []) assert.ok(!payment(pay).includes(UNKNOWN), `${name}: ${payment(pay)}`);
      }
    }
  }
  assert.deepEqual([...kinds].sort(), ["choice", "deposit", "notify"]);
  assert.ok(n > 100, `${n} inputs`);
});
