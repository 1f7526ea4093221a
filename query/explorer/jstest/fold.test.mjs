// Folding deep contracts: the path taken and what follows the current
// position open, the rest folded beyond a few levels; sequences (Pay, Let,
// Assert) on one level.
import test from "node:test";
import assert from "node:assert/strict";
import { buildTree, contractNodes, fold, markPath } from "../static/js/tree.js";
import { contracts } from "./reference.mjs";

const ada = { currency_symbol: "", token_name: "" };
const alice = { role_token: "alice" };
const deposit = (n) => ({ party: alice, deposits: n, of_token: ada, into_account: alice });
const pay = (n, then) => ({ pay: n, from_account: alice, to: { party: alice }, token: ada, then });
// nested builds a guessing game of depth n: each round a When whose one case goes on to the next round.
const nested = (n, t = 1000) => (n === 0 ? "close" : { when: [{ case: deposit(n), then: pay(n, nested(n - 1, t + 1)) }], timeout: t, timeout_continuation: "close" });

const all = (n) => [n, ...n.children.flatMap(all)];

test("a Pay, Let or Assert keeps its continuation on its level; branches go one level down", () => {
  const root = fold(buildTree({ let: "x", be: 1, then: { assert: true, then: pay(1, { if: true, then: "close", else: pay(2, "close") }) } }));
  const byKind = (k) => all(root).filter((n) => n.kind === k);
  assert.deepEqual([root.level, byKind("assert")[0].level, byKind("pay")[0].level, byKind("if")[0].level], [0, 0, 0, 0]);
  assert.deepEqual(byKind("then").map((n) => n.level), [1]);
  assert.deepEqual(byKind("pay").map((n) => n.level), [0, 2]); // (the else's Pay: If -> else -> Pay)
  assert.equal(root.size, all(root).length - 1);
});

test("a deep contract folds beyond the top levels, but the path taken and what follows the position stay open", () => {
  const c = nested(15);
  const root = buildTree(c);
  // The contract took three rounds: positions after each step.
  const positions = [c];
  let x = c;
  for (let i = 0; i < 3; i++) {
    x = x.when[0].then.then; // the case's Pay, then the next round
    positions.push(x);
  }
  const cur = markPath(root, positions);
  fold(root, { top: 2, near: 3 });
  assert.ok(cur && cur.current);
  for (const n of all(root)) {
    if (n.taken && n.children.length) assert.ok(n.open, `taken ${n.kind} at level ${n.level} open`);
  }
  const below = (n, d = 0, out = []) => {
    for (const ch of n.children) {
      const flat = ["pay", "let", "assert"].includes(n.kind);
      const dd = flat ? d : d + 1;
      out.push([ch, dd]);
      below(ch, dd, out);
    }
    return out;
  };
  for (const [n, d] of below(cur)) if (n.children.length) assert.equal(n.open, d < 3, `${n.kind} ${d} below the position`);
  const deepest = Math.max(...all(root).map((n) => n.level));
  assert.ok(deepest >= 30, `levels ${deepest}`);
  const openLevels = all(root).filter((n) => n.open).map((n) => n.level);
  assert.ok(Math.max(...openLevels) <= all(root).find((n) => n.current).level + 3);
  // Folded nodes say how much they hold.
  const folded = all(root).filter((n) => n.children.length && !n.open);
  assert.ok(folded.length > 0 && folded.every((n) => n.size > 0));
});

test("without a position (the current contract alone) the top levels are open", () => {
  const root = fold(buildTree(nested(6)), { top: 2 });
  for (const n of all(root)) if (n.children.length) assert.equal(n.open, n.level < 2, `${n.kind} at level ${n.level}`);
});

test("every reference contract folds, its sizes adding up", () => {
  for (const { name, contract } of contracts()) {
    const root = fold(buildTree(contract));
    for (const n of contractNodes(root)) assert.equal(n.size, n.children.reduce((s, ch) => s + 1 + ch.size, 0), name);
  }
});
