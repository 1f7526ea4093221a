// Marlowe notation: every construct, the layout (what fits stays on a
// line), and every reference contract written without an unreadable part.
import test from "node:test";
import assert from "node:assert/strict";
import { notation, notationFlat } from "../static/js/notation.js";
import { contracts } from "./reference.mjs";

const ada = { currency_symbol: "", token_name: "" };
const alice = { role_token: "alice" };
const bob = { address: "addr_test1vz" };

test("every construct, on one line", () => {
  const c = {
    when: [
      { case: { party: alice, deposits: { add: 1, and: { negate: 2 } }, of_token: ada, into_account: alice }, then: { pay: { amount_of_token: ada, in_account: alice }, from_account: alice, to: { party: bob }, token: ada, then: "close" } },
      { case: { for_choice: { choice_name: "x", choice_owner: bob }, choose_between: [{ from: 0, to: 3 }, { from: 5, to: 5 }] },
        then: { if: { both: { chose_something_for: { choice_name: "x", choice_owner: bob } }, and: { not: { value: { value_of_choice: { choice_name: "x", choice_owner: bob } }, ge_than: 2 } } },
          then: { let: "y", be: { multiply: { divide: 10, by: 2 }, times: { value: "time_interval_start", minus: "time_interval_end" } }, then: { assert: true, then: "close" } },
          else: { pay: { if: { either: false, or: { value: 1, lt: 2 } }, then: { use_value: "y" }, else: 0 }, from_account: bob, to: { account: alice }, token: { currency_symbol: "ab", token_name: "Globe" }, then: "close" } } },
      { case: { notify_if: { value: 1, equal_to: 1 } }, merkleized_then: "0123abcd" },
    ],
    timeout: 1704067200000,
    timeout_continuation: "close",
  };
  assert.equal(notationFlat(c),
    'When [Case (Deposit (Role "alice") (Role "alice") (Token "" "") (AddValue (Constant 1) (NegValue (Constant 2)))) (Pay (Role "alice") (Party (Address "addr_test1vz")) (Token "" "") (AvailableMoney (Role "alice") (Token "" "")) Close), ' +
    'Case (Choice (ChoiceId "x" (Address "addr_test1vz")) [Bound 0 3, Bound 5 5]) (If (AndObs (ChoseSomething (ChoiceId "x" (Address "addr_test1vz"))) (NotObs (ValueGE (ChoiceValue (ChoiceId "x" (Address "addr_test1vz"))) (Constant 2)))) ' +
    '(Let "y" (MulValue (DivValue (Constant 10) (Constant 2)) (SubValue TimeIntervalStart TimeIntervalEnd)) (Assert TrueObs Close)) ' +
    '(Pay (Address "addr_test1vz") (Account (Role "alice")) (Token "ab" "Globe") (Cond (OrObs FalseObs (ValueLT (Constant 1) (Constant 2))) (UseValue "y") (Constant 0)) Close)), ' +
    'MerkleizedCase (Notify (ValueEQ (Constant 1) (Constant 1))) "0123abcd"] 1704067200000 Close');
});

test("a term that does not fit puts each argument on a line of its own", () => {
  const c = { when: [{ case: { party: alice, deposits: 100000000, of_token: ada, into_account: alice }, then: "close" }], timeout: 1704067200000, timeout_continuation: "close" };
  assert.equal(notation(c, { width: 200 }), notationFlat(c));
  assert.equal(notation(c, { width: 90 }), [
    "When",
    "    [ Case",
    '          (Deposit (Role "alice") (Role "alice") (Token "" "") (Constant 100000000))',
    "          Close",
    "    ]",
    "    1704067200000",
    "    Close",
  ].join("\n"));
  // Narrower, the Deposit breaks too, its closing parenthesis on a line of its own.
  assert.match(notation(c, { width: 60 }), /\(Deposit\n {14}\(Role "alice"\)\n {14}\(Role "alice"\)\n {14}\(Token "" ""\)\n {14}\(Constant 100000000\)\n {10}\)/);
  assert.equal(notation("close"), "Close");
});

test("big numbers stay exact; strings are quoted and escaped", () => {
  assert.equal(notationFlat({ pay: 123456789012345678901234567890n, from_account: { role_token: 'a"b' }, to: { party: alice }, token: ada, then: "close" }),
    'Pay (Role "a\\"b") (Party (Role "alice")) (Token "" "") (Constant 123456789012345678901234567890) Close');
});

test("what it cannot read is marked, not dropped", () => {
  assert.match(notationFlat({ pay: { weird: 1 }, from_account: alice, to: { party: alice }, token: ada, then: "close" }), /‹unreadable: \{"weird":1\}›/);
});

test("every reference contract is written in full", () => {
  for (const { name, contract } of contracts()) {
    const text = notation(contract);
    assert.ok(!text.includes("‹unreadable"), name);
    // The layout only adds white space to the one-line form.
    assert.equal(text.replace(/\s+/g, "").replace(/\[|\]|,/g, ""), notationFlat(contract).replace(/\s+/g, "").replace(/\[|\]|,/g, ""), name);
  }
});
