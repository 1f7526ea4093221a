// The contract tree: every construct, merkleized cases (revealed or not),
// the path taken to the current position, and every reference contract
// and trace.
import test from "node:test";
import assert from "node:assert/strict";
import { buildTree, contractKind, contractNodes, continuationsOf, markPath, nextDeadline, treeText } from "../static/js/tree.js";
import { UNKNOWN } from "../static/js/words.js";
import { contracts, paths } from "./reference.mjs";

const ada = { currency_symbol: "", token_name: "" };
const alice = { role_token: "alice" };
const bob = { role_token: "bob" };
const T = 1704067200000; // 1 Jan 2024 00:00:00 UTC

const pay = (n, then) => ({ pay: n, from_account: alice, to: { party: bob }, token: ada, then });
const deposit = (n) => ({ party: alice, deposits: n, of_token: ada, into_account: alice });

test("every construct, as text", () => {
  const c = {
    when: [
      { case: deposit(100000000), then: { let: "x", be: { use_value: "y" }, then: { assert: { value: 1, lt: 2 }, then: pay(5000000, "close") } } },
      { case: { for_choice: { choice_name: "ok", choice_owner: bob }, choose_between: [{ from: 0, to: 1 }] },
        then: { if: { chose_something_for: { choice_name: "ok", choice_owner: bob } }, then: "close", else: { pay: 1, from_account: bob, to: { account: alice }, token: ada, then: "close" } } },
      { case: { notify_if: true }, then: "close" },
    ],
    timeout: T,
    timeout_continuation: "close",
  };
  assert.equal(treeText(buildTree(c)), [
    "Wait for one of these 3 before the deadline (deadline 1 Jan 2024, 00:00:00 UTC)",
    "  alice deposits 100 ADA into their own account",
    "    Let “x” be the value “y”",
    "      Assert that 1 < 2 (a warning if not)",
    "        Pay 5 ADA from alice’s account to bob",
    "          Close: the contract ends and pays every account out to its owner",
    "  bob chooses between 0 and 1 for “ok”",
    "    If “ok” by bob has been made",
    "      then",
    "        Close: the contract ends and pays every account out to its owner",
    "      else",
    "        Pay 0.000001 ADA from bob’s account to alice’s account",
    "          Close: the contract ends and pays every account out to its owner",
    "  someone notifies the contract",
    "    Close: the contract ends and pays every account out to its owner",
    "  after the deadline",
    "    Close: the contract ends and pays every account out to its owner",
  ].join("\n"));
  const kinds = new Set([...walk(buildTree(c))].map((n) => n.kind));
  assert.deepEqual([...kinds].sort(), ["assert", "case", "close", "else", "if", "let", "pay", "then", "timeout", "when"]);
});

test("a When without cases waits for its deadline", () => {
  assert.equal(treeText(buildTree({ when: [], timeout: T, timeout_continuation: "close" })),
    "Wait until the deadline (deadline 1 Jan 2024, 00:00:00 UTC)\n  after the deadline\n    Close: the contract ends and pays every account out to its owner");
});

test("merkleized cases: hidden until a step reveals the continuation", () => {
  const hash = "60fdbba65cf3979fac8b660a3f800f5b56280a4f7896e71f47a29f3d3e331649";
  const c = { when: [{ case: deposit(10), merkleized_then: hash }], timeout: T, timeout_continuation: "close" };
  const hidden = buildTree(c);
  assert.equal(hidden.children[0].merkleized.revealed, false);
  assert.equal(hidden.children[0].children[0].kind, "hidden");
  assert.match(treeText(hidden), /alice deposits 0\.00001 ADA into their own account \[merkleized\]\n {4}merkleized continuation 60fdbba6.* \(not revealed/);
  const revealed = buildTree(c, { continuations: continuationsOf([[{ ...input10(), continuation_hash: hash, merkleized_continuation: pay(10, "close") }]]) });
  assert.equal(revealed.children[0].merkleized.revealed, true);
  assert.equal(treeText(revealed).split("\n")[1], "  alice deposits 0.00001 ADA into their own account [merkleized, revealed]");
  assert.equal(revealed.children[0].children[0].kind, "pay");
});

function input10() {
  return { input_from_party: alice, that_deposits: 10, of_token: ada, into_account: alice };
}

test("the path taken and the current position", () => {
  const inner = { when: [{ case: { notify_if: true }, then: "close" }], timeout: T + 2, timeout_continuation: "close" };
  const c = { when: [{ case: deposit(1), then: pay(1, inner) }, { case: deposit(2), then: inner }], timeout: T + 1, timeout_continuation: "close" };
  const root = buildTree(c);
  const cur = markPath(root, [c, inner]);
  // The first case's Pay leads to the same When as the second case; the
  // nearest one below the previous position, breadth first, is the second's.
  assert.equal(cur.kind, "when");
  assert.equal(cur.current, true);
  assert.ok(root.taken);
  assert.match(treeText(root), /<- current position/);
  assert.equal([...walk(root)].filter((n) => n.current).length, 1);
  const again = buildTree(c);
  assert.equal(markPath(again, [c, { when: [], timeout: 0, timeout_continuation: "close" }]), null, "a position that is not in the tree");
});

test("the next deadline the contract can reach", () => {
  const c = { when: [{ case: deposit(1), then: "close" }], timeout: T, timeout_continuation: { when: [], timeout: T + 1000, timeout_continuation: "close" } };
  assert.equal(nextDeadline(c, T - 1), T);
  assert.equal(nextDeadline(c, T), T + 1000);
  assert.equal(nextDeadline(c, T + 1000), null);
  assert.equal(nextDeadline({ if: true, then: { when: [], timeout: 5, timeout_continuation: "close" }, else: { when: [], timeout: 3, timeout_continuation: "close" } }, 0), 3);
});

test("every reference contract: every node readable", () => {
  const seen = new Set();
  const list = contracts();
  assert.equal(list.length, 24);
  for (const { name, contract } of list) {
    const root = buildTree(contract);
    for (const n of walk(root)) {
      seen.add(n.kind);
      assert.notEqual(n.kind, "unknown", name);
      assert.ok(!n.label.includes(UNKNOWN), `${name}: ${n.label}`);
      if (n.contract !== undefined) assert.notEqual(contractKind(n.contract), "unknown", name);
    }
    assert.ok(treeText(root).length > 0);
  }
  for (const k of ["close", "pay", "if", "when", "let", "assert", "case", "timeout", "then", "else"]) assert.ok(seen.has(k), k);
});

test("every reference trace: each step's contract is found below the previous one", () => {
  let steps = 0;
  for (const { name, paths: ps } of paths()) {
    for (const p of ps) {
      const positions = [p.contract, ...p.transactions.map((t) => t.output.contract)];
      const root = buildTree(p.contract);
      const cur = markPath(root, positions);
      assert.ok(cur, `${name}: a position is not in the tree`);
      assert.equal([...contractNodes(root)].filter((n) => n.current).length, 1, name);
      steps += p.transactions.length;
    }
  }
  assert.ok(steps > 50, `${steps} steps`);
});

function* walk(n) {
  yield n;
  for (const c of n.children) yield* walk(c);
}
