// A Marlowe contract as a tree for display: one node per construct (Close,
// Pay, If, When with its cases and its timeout, Let, Assert), merkleized
// cases marked (and expanded where a step revealed the continuation), and
// the path the contract took up to its current position. No DOM: the page
// renders the nodes (contract-page.js) and the unit tests read them as
// text (treeText).

import { canonical } from "./json.js";
import { date } from "./format.js";
import { account, action, observation, payee, quantity, UNKNOWN, value } from "./words.js";

const is = (o) => o !== null && typeof o === "object" && !Array.isArray(o);
const has = (o, ...keys) => is(o) && keys.every((k) => k in o);

/**
 * Node: {kind, label, children, contract?, deadline?, merkleized?, current?, taken?}
 *   kind: close, pay, if, when, let, assert (contracts); then, else, case,
 *   timeout (branches); hidden (a merkleized continuation not revealed);
 *   unknown.
 *   contract: the core JSON of a contract node (to find positions).
 *   merkleized: {hash, revealed} on a case whose continuation is merkleized.
 */

/** contractKind names a contract's construct. */
export function contractKind(c) {
  if (c === "close") return "close";
  if (has(c, "pay", "from_account", "to", "token", "then")) return "pay";
  if (has(c, "if", "then", "else")) return "if";
  if (has(c, "when", "timeout", "timeout_continuation")) return "when";
  if (has(c, "let", "be", "then")) return "let";
  if (has(c, "assert", "then")) return "assert";
  return "unknown";
}

/**
 * buildTree turns a contract into nodes. continuations maps a merkleized
 * continuation's hash to the contract a step revealed for it.
 */
export function buildTree(c, { continuations = new Map(), opts = {} } = {}) {
  const seen = new Set(); // hashes being expanded (a continuation cannot contain itself, but be safe)
  const node = (c, parent) => {
    const kind = contractKind(c);
    const n = { kind, label: "", children: [], contract: c, parent };
    switch (kind) {
      case "close":
        n.label = "Close: the contract ends and pays every account out to its owner";
        break;
      case "pay":
        n.label = `Pay ${quantity(c.pay, c.token, opts)} from ${account(c.from_account, opts)} to ${payee(c.to, opts)}`;
        n.children.push(node(c.then, n));
        break;
      case "if": {
        n.label = `If ${observation(c.if, opts)}`;
        const t = { kind: "then", label: "then", children: [], parent: n };
        t.children.push(node(c.then, t));
        const e = { kind: "else", label: "else", children: [], parent: n };
        e.children.push(node(c.else, e));
        n.children.push(t, e);
        break;
      }
      case "when": {
        n.deadline = Number(c.timeout);
        n.label = c.when.length === 0 ? "Wait until the deadline" : c.when.length === 1 ? "Wait for this before the deadline" : `Wait for one of these ${c.when.length} before the deadline`;
        c.when.forEach((k, i) => {
          const cn = { kind: "case", label: action(k.case, opts), children: [], parent: n, index: i };
          if ("merkleized_then" in k) {
            const hash = k.merkleized_then;
            const cont = continuations.get(hash);
            cn.merkleized = { hash, revealed: cont !== undefined };
            if (cont !== undefined && !seen.has(hash)) {
              seen.add(hash);
              cn.children.push(node(cont, cn));
              seen.delete(hash);
            } else {
              cn.children.push({ kind: "hidden", label: `merkleized continuation ${hash} (not revealed: no step has taken this case)`, children: [], parent: cn, hash });
            }
          } else {
            cn.children.push(node(k.then, cn));
          }
          n.children.push(cn);
        });
        const to = { kind: "timeout", label: "after the deadline", children: [], parent: n, deadline: n.deadline };
        to.children.push(node(c.timeout_continuation, to));
        n.children.push(to);
        break;
      }
      case "let":
        n.label = `Let “${c.let}” be ${value(c.be, opts)}`;
        n.children.push(node(c.then, n));
        break;
      case "assert":
        n.label = `Assert that ${observation(c.assert, opts)} (a warning if not)`;
        n.children.push(node(c.then, n));
        break;
      default:
        n.label = UNKNOWN;
    }
    return n;
  };
  return node(c, null);
}

/** continuationsOf collects the merkleized continuations that inputs revealed. */
export function continuationsOf(inputLists) {
  const m = new Map();
  for (const inputs of inputLists) {
    for (const i of inputs || []) {
      if (has(i, "continuation_hash", "merkleized_continuation")) m.set(i.continuation_hash, i.merkleized_continuation);
    }
  }
  return m;
}

/** contracts yields the contract nodes of a tree, breadth first from n. */
export function* contractNodes(n) {
  const queue = [n];
  for (let i = 0; i < queue.length; i++) {
    const x = queue[i];
    if (x.contract !== undefined) yield x;
    for (const c of x.children) queue.push(c);
  }
}

/**
 * markPath follows a contract's positions (its initial contract, then the
 * contract after each step) through the tree: each position is looked for
 * below the previous one, nearest first. The nodes passed are marked taken,
 * the last position current. It returns the current node (null when a
 * position is not in the tree, for example a closed contract's Close).
 */
export function markPath(root, positions) {
  const keys = new WeakMap();
  const key = (c) => {
    if (!is(c)) return canonical(c);
    let k = keys.get(c);
    if (k === undefined) keys.set(c, (k = canonical(c)));
    return k;
  };
  // A cheap fingerprint first (construct and timeout), the whole value
  // only when it matches.
  const quick = (c) => contractKind(c) + ":" + (is(c) ? String(c.timeout ?? c.pay ?? c.let ?? "") : "");
  const same = (n, p, want, wantQuick) => quick(n.contract) === wantQuick && key(n.contract) === want;
  let at = root;
  root.taken = true;
  for (const p of positions.slice(1)) {
    if (p === null || p === undefined) break;
    const want = key(p);
    const wantQuick = quick(p);
    let found = null;
    for (const n of contractNodes(at)) {
      if (n !== at && same(n, p, want, wantQuick)) {
        found = n;
        break;
      }
    }
    if (!found) {
      for (const n of contractNodes(root)) {
        if (same(n, p, want, wantQuick)) {
          found = n;
          break;
        }
      }
    }
    if (!found) return null;
    for (let x = found; x && !x.taken; x = x.parent) x.taken = true;
    at = found;
  }
  at.current = true;
  return at;
}

/** treeText writes a tree as indented lines (for tests and "copy as text"). */
export function treeText(n, { timeZone = "UTC", depth = 0 } = {}) {
  let line = "  ".repeat(depth) + n.label;
  if (n.deadline !== undefined && n.kind === "when") line += ` (deadline ${date(n.deadline, { timeZone })})`;
  if (n.merkleized) line += n.merkleized.revealed ? " [merkleized, revealed]" : " [merkleized]";
  if (n.current) line += " <- current position";
  const out = [line];
  for (const ch of n.children) out.push(treeText(ch, { timeZone, depth: depth + 1 }));
  return out.join("\n");
}

/** nextDeadline is the earliest timeout of a When the contract can reach without input, after now. */
export function nextDeadline(c, now) {
  let best = null;
  const walk = (c, depth) => {
    if (depth > 200 || !is(c)) return;
    const k = contractKind(c);
    if (k === "when") {
      const t = Number(c.timeout);
      if (t > now && (best === null || t < best)) best = t;
      if (t <= now) walk(c.timeout_continuation, depth + 1);
    } else if (k === "if") {
      walk(c.then, depth + 1);
      walk(c.else, depth + 1);
    } else if (k === "pay" || k === "let" || k === "assert") walk(c.then, depth + 1);
  };
  walk(c, 0);
  return best;
}

/** SEQUENCE: constructs whose continuation follows them at the same level (drawn as a list, not nested). */
export const SEQUENCE = new Set(["pay", "let", "assert"]);

/**
 * fold decides which nodes of a tree are open when first drawn, so that a
 * deep contract reads without running off to the right: the path taken
 * (markPath) is open, and so are the first `near` levels below the
 * current position (what can happen next) and the first `top` levels of
 * the whole tree; everything else is folded, to be opened on demand. A
 * level is a branch (a When's cases and timeout, an If's two branches):
 * a Pay, Let or Assert is followed by its continuation on the same level.
 * Each node gets level, size (the constructs below it) and open.
 */
export function fold(root, { top = 2, near = 3 } = {}) {
  const walk = (n, level, below) => {
    n.level = level;
    n.size = 0;
    const here = n.current ? 0 : below;
    for (const ch of n.children) {
      const flat = SEQUENCE.has(n.kind);
      n.size += 1 + walk(ch, flat ? level : level + 1, here === null ? null : flat ? here : here + 1);
    }
    n.open = n.children.length > 0 && (Boolean(n.taken) || level < top || (here !== null && here < near));
    return n.size;
  };
  walk(root, 0, null);
  return root;
}
