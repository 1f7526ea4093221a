// The contract page: header, state, what can be done next, the contract
// as a tree with the path taken and the current position, the timeline of
// every step (rolled-back ones struck through, with the rollback that
// removed them) and the payouts with their withdrawals. Kept current by
// GET /events?contractId=…

import { ApiError, all, contractPath, get, pageURL, url } from "./api.js";
import { parse, stringify } from "./json.js";
import {
  amount, assets, assetsEmpty, blockText, count, party, roleName, short, shortContractId,
} from "./format.js";
import { buildTree, continuationsOf, fold, markPath, nextDeadline, SEQUENCE } from "./tree.js";
import { bounds, choiceId, input, inputKind, KIND_NAMES, noInputs, payout } from "./words.js";
import { $, ago, banner, boot, chrome, copyButton, copyable, extLink, fill, flash, follow, h, showTip, site, tickRelative, timeEl } from "./ui.js";
import { blockEl, renderParties, renderPayouts, renderSource, wireSource } from "./contract-views.js";

const id = new URLSearchParams(location.search).get("id") || "";
const S = {
  network: "",
  contract: null,
  history: [],
  payouts: [],
  markers: new Map(), // seq of a rolled_back record -> the record (or a promise of it)
  treeKey: "",
  open: new Set(), // keys of tree nodes the reader opened
  closed: new Set(), // ... and closed
  view: "whole",
  loaded: false,
  busy: false,
  again: null,
  live: null,
  nextAt: null, // ms, or null for now
  shownSeq: null, // the seq of the state shown
  flashed: new Map(), // seq -> how the timeline flashed the record ("new", "rollback")
  newestSlot: -1, // the slot of the newest record of the contract shown or told
};

// The script versions as people know them (contracts/marlowe/scripts.go):
// every version runs the same Marlowe semantics; they differ in how they
// were built and what they cost to run.
const VERSIONS = {
  v1: "the audited Marlowe validator, the first on chain (the Runtime's auditV1Scripts)",
  v2: "the audited validator with the audit's fixes (postAuditV1Scripts)",
  v3: "the validator rebuilt for cardano-node 8.1.2 (node812V1Scripts)",
  v4: "the validator built with Plutus 1.15 (plutus11500V1Scripts)",
  v5: "the current validator, which keeps Case as data (caseAsDataV1Scripts)",
};

// ---- loading ----

async function refresh({ minSeq } = {}) {
  if (S.busy) {
    S.again = { minSeq: Math.max(minSeq || 0, (S.again && S.again.minSeq) || 0) };
    return;
  }
  S.busy = true;
  try {
    let contract;
    try {
      contract = await get(contractPath(id), { minSeq });
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) {
        showMissing(e.seq);
        return;
      }
      throw e;
    }
    const [hist, pays] = await Promise.all([
      all(contractPath(id, "/history"), { includeRolledBack: "true", limit: 1000 }),
      all("payouts", { contractId: id, limit: 1000 }),
    ]);
    const before = S.history;
    S.contract = contract;
    S.history = hist.results;
    S.payouts = pays.results;
    S.shownSeq = hist.seq;
    if (!document.documentElement.dataset.firstSeq) document.documentElement.dataset.firstSeq = String(hist.seq); // (the state first drawn)
    for (const r of S.history) if (r.block) S.newestSlot = Math.max(S.newestSlot, Number(r.block.slot));
    render(before);
    showTip({ ...hist.block, seq: hist.seq });
    S.live.loaded();
  } catch (e) {
    if (e instanceof ApiError && e.code === "not_yet_applied") S.again = { minSeq: 0 };
    else banner(`The query API did not answer: ${e.message}`, "bad", { timeout: 6000 });
  } finally {
    S.busy = false;
    if (S.again) {
      const a = S.again;
      S.again = null;
      setTimeout(() => refresh(a), 200);
    }
  }
}

// showMissing: no such contract as of seq; the events after seq bring it
// if it is created later (or the projection had not applied it yet).
function showMissing(seq) {
  const el = $("load-error");
  el.hidden = false;
  el.textContent = `There is no contract ${id} as of the API’s current state: it is not created yet, or a rollback removed it. This page shows it as soon as it is on chain.`;
  $("contract").hidden = true;
  if (Number.isFinite(seq)) {
    S.shownSeq = seq;
    S.live.loaded();
  }
}

// startLive hears the browser's one event stream: the records of this
// contract, and rollbacks that may undo its steps, read it again.
// A rollback matters only when it goes back before the newest record of
// the contract the page shows or was told of (it may undo it).
function startLive() {
  S.live = follow({
    shownSeq: () => S.shownSeq ?? null,
    relevant: (r) => {
      if (r.contractId === id) {
        if (r.block) S.newestSlot = Math.max(S.newestSlot, Number(r.block.slot));
        return true;
      }
      return r.kind === "rolled_back" && r.payload && r.payload.to !== undefined && Number(r.payload.to.slot ?? 0) < S.newestSlot;
    },
    onChange: (minSeq) => refresh({ minSeq: minSeq || undefined }),
  });
}

// rollbackMarker reads the rolled_back record of a seq: the first
// rolled_back record of GET /events after the seq before it.
function rollbackMarker(seq) {
  if (S.markers.has(seq)) return S.markers.get(seq);
  const p = (async () => {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), 5000);
    try {
      const res = await fetch(url("events", { kind: "rolled_back", from: String(seq - 1) }), { signal: ctl.signal });
      if (!res.ok || !res.body) return null;
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return null;
        buf += value;
        const m = buf.match(/^data: (.*)$/m);
        if (m) {
          const rec = parse(m[1]);
          return rec.seq === seq ? rec : null;
        }
      }
    } catch {
      return null;
    } finally {
      clearTimeout(timer);
      ctl.abort();
    }
  })();
  S.markers.set(seq, p);
  return p;
}

// ---- the chain of the contract ----

// chainOf follows the current (not rolled-back) records from the creation:
// the contract at each position, and which contract each step spent.
function chainOf(history, contract) {
  const at = new Map(); // utxo -> contract (core JSON)
  at.set(contract.contractId, contract.initialContract);
  const positions = [contract.initialContract];
  for (const r of history) {
    if (r.kind !== "inputs_applied") continue;
    const out = r.payload.output;
    const c = out && out.datum ? out.datum.marloweContract : "close";
    if (out) at.set(out.utxo, c);
    if (r.rolledBackBy === undefined) positions.push(r.payload.closed ? "close" : c);
  }
  return { at, positions };
}

// ---- rendering ----

function render(before) {
  const c = S.contract;
  $("load-error").hidden = true;
  $("contract").hidden = false;
  document.title = `Contract ${shortContractId(c.contractId)} · marlowe-follower`;
  fill($("title-id"), copyable(c.contractId, shortContractId(c.contractId)));
  renderFacts(c);
  renderState(c);
  const chain = chainOf(S.history, c);
  renderTree(c, chain);
  renderTimeline(chain, before);
  renderParties(c, S.history, S.payouts);
  renderSource(c);
  renderPayouts(S.payouts);
  renderNext();
  S.loaded = true;
  document.documentElement.dataset.steps = String(S.history.filter((r) => r.kind === "inputs_applied" && r.rolledBackBy === undefined).length);
}

function renderFacts(c) {
  const tags = Object.entries(c.tags || {});
  const created = S.history.find((r) => r.kind === "contract_created" && r.rolledBackBy === undefined);
  const dd = (label, ...v) => [h("dt", {}, label), h("dd", {}, ...v)];
  fill($("facts"),
    dd("Contract id", copyable(c.contractId)),
    dd("Status", h("span", { class: "badge " + c.status }, c.status), c.status === "open" ? " · waiting for its next step" : " · it has ended"),
    dd("Script version", h("strong", {}, c.version), " ", h("span", { class: "muted small" }, `· ${VERSIONS[c.version] || "a Marlowe validator this page does not know"}. Every version runs the same Marlowe semantics; the version says which validator script locks the contract, and so its address.`)),
    dd("Roles currency", c.roleTokenMintingPolicyId
      ? [copyable(c.roleTokenMintingPolicyId, short(c.roleTokenMintingPolicyId, 10, 6)), extLink("policy", c.roleTokenMintingPolicyId), " ", h("a", { href: pageURL("", { roleCurrency: c.roleTokenMintingPolicyId }) }, "its contracts")]
      : h("span", { class: "muted" }, "none: the parties are addresses")),
    dd("Address", copyable(c.address, short(c.address, 16, 8)), extLink("address", c.address)),
    dd("Tags", tags.length ? tags.map(([t, v]) => h("span", {}, h("a", { class: "tag", href: pageURL("", { tag: t }) }, t), v !== null && v !== undefined ? h("code", {}, stringify(v)) : null)) : h("span", { class: "muted" }, "none")),
    dd("Metadata", c.metadata && Object.keys(c.metadata).length
      ? h("details", {}, h("summary", {}, `${Object.keys(c.metadata).length} label(s): ${Object.keys(c.metadata).join(", ")}`), h("pre", { class: "mono small" }, stringify(c.metadata, 2)))
      : h("span", { class: "muted" }, "none")),
    dd("Created", blockEl(c.block), " · transaction ", copyable(c.contractId.split("#")[0], short(c.contractId.split("#")[0], 10, 6)), extLink("tx", c.contractId.split("#")[0]),
      created && created.payload.mintedRoles && created.payload.mintedRoles.length ? [" · minted roles: ", created.payload.mintedRoles.map(roleName).join(", ")] : null),
    dd("Source", c.sourceId
      ? [copyable(c.sourceId, short(c.sourceId, 10, 6)), " ", h("a", { class: "small source-link", dataset: { source: c.sourceId }, href: pageURL("sources/" + c.sourceId), title: `The contract as created, as a contract source (GET /sources/${c.sourceId}): the hash of its initial contract` }, "as a source"),
        " ", h("a", { class: "small", href: pageURL("sources/" + c.sourceId + "/closure"), title: "Every continuation it reaches, as far as the chain revealed them" }, "with its continuations")]
      : h("span", { class: "muted" }, "not known")),
    dd("Steps", count(c.steps), " · last activity ", blockEl(c.lastBlock)),
    dd("Assets locked", assetsEmpty(c.assets) ? h("span", { class: "muted" }, "nothing") : assets(c.assets),
      c.utxo ? [" in ", copyable(c.utxo, shortContractId(c.utxo))] : null),
  );
}

function renderState(c) {
  const st = c.state;
  const el = $("state");
  if (!st) {
    fill(el, h("p", { class: "muted" }, "The contract is closed: it has no state left."));
    return;
  }
  const table = (caption, head, rows) => rows.length
    ? h("table", {}, h("caption", { class: "visually-hidden" }, caption), h("thead", {}, h("tr", {}, head.map((x, i) => h("th", { scope: "col", class: i === head.length - 1 ? "num" : undefined }, x)))),
      h("tbody", {}, rows.map((r) => h("tr", {}, r.map((x, i) => h("td", { class: i === r.length - 1 ? "num" : undefined }, x))))))
    : h("p", { class: "muted" }, `No ${caption.toLowerCase()}.`);
  fill(el,
    h("h3", {}, "Accounts"),
    table("Accounts", ["Owner", "Amount"], (st.accounts || []).map(([[owner, token], n]) => [party(owner), amount(n, token)])),
    h("h3", {}, "Choices made"),
    table("Choices", ["Choice", "Number"], (st.choices || []).map(([cid, n]) => [choiceId(cid), String(n)])),
    h("h3", {}, "Bound values"),
    table("Bound values", ["Name", "Value"], (st.boundValues || []).map(([name, n]) => [`“${name}”`, String(n)])),
    h("p", { class: "small muted" }, "Earliest time of the next step (minTime): ", timeEl(Number(st.minTime))),
  );
}

// The tree: re-rendered only when the position or the revealed
// continuations change, keeping the nodes the reader opened or closed.
function renderTree(c, chain) {
  const inputs = S.history.filter((r) => r.kind === "inputs_applied").map((r) => r.payload.inputs);
  const continuations = continuationsOf(inputs);
  const applied = S.history.filter((r) => r.kind === "inputs_applied" && r.rolledBackBy === undefined).map((r) => r.seq).join(",");
  const key = [S.view, applied, continuations.size, c.status, S.nextKey || ""].join("/");
  if (key === S.treeKey) return;
  S.treeKey = key;
  const el = $("tree");
  let root;
  if (S.view === "current") {
    if (!c.currentContract) {
      fill(el, h("p", { class: "muted" }, "Nothing is left: the contract is closed."));
      return;
    }
    root = buildTree(c.currentContract, { continuations });
    root.current = true;
    root.taken = true;
  } else {
    root = buildTree(c.initialContract, { continuations });
    const cur = markPath(root, chain.positions);
    if (c.status === "closed" && cur) cur.current = false; // the path shows where it ended
  }
  fold(root);
  S.tree = root;
  fill(el, h("ul", { class: "tree", "aria-label": "The contract" }, nodeEl(root, "r")));
}

const KIND_LABELS = { close: "Close", pay: "Pay", if: "If", when: "When", let: "Let", assert: "Assert", then: "then", else: "else", case: "Case", timeout: "Timeout", hidden: "Hidden", unknown: "?" };

function lineOf(n) {
  const parts = [h("span", { class: "node-kind" }, KIND_LABELS[n.kind] || n.kind)];
  if (n.kind === "then" || n.kind === "else") parts.push(h("span", { class: "branch" }, n.kind === "then" ? "if it holds:" : "otherwise:"));
  else if (n.kind === "timeout") parts.push(h("span", { class: "branch" }, "if nothing happened by the deadline:"));
  else if (n.kind === "hidden") parts.push(h("span", { class: "muted" }, "merkleized continuation ", h("code", { title: n.hash }, short(n.hash, 10, 6)), " (not revealed: no step took this case)"));
  else parts.push(h("span", { class: "label" }, n.label));
  if (n.kind === "when") parts.push(h("span", { class: "deadline" }, "· deadline ", ago(n.deadline)));
  if (n.merkleized) {
    parts.push(" ", h("span", { class: "badge merkle", title: "continuation hash " + n.merkleized.hash }, n.merkleized.revealed ? "merkleized, revealed" : "merkleized"));
    // A revealed continuation is a contract source (GET /sources/{hash}: its hash is its source id).
    if (n.merkleized.revealed) parts.push(" ", h("a", { class: "small source-link", href: pageURL("sources/" + n.merkleized.hash), title: "The contract source the chain revealed for this case (GET /sources/" + n.merkleized.hash + ")" }, "its source"));
  }
  if (n.kind === "case" && n.parent && n.parent.current && S.applicable && S.applicable.has(n.index)) {
    parts.push(" ", h("span", { class: "badge open applicable" }, "can be done now"));
  }
  if (n.taken && !n.current && (n.kind === "case" || n.kind === "timeout" || n.kind === "then" || n.kind === "else")) {
    parts.push(" ", h("span", { class: "badge taken", title: "The contract went this way" }, n.kind === "timeout" ? "taken: the deadline passed" : "taken"));
  }
  if (n.current) parts.push(" ", h("span", { class: "badge here" }, "current position"));
  return parts;
}

// nodeEl draws a node as list items: one for the node, and for a Pay, Let
// or Assert its continuation after it on the same level (a sequence reads
// down the page, not off to the right). A node with branches is a
// <details>, open as fold() decided or as the reader left it; its
// branches are drawn when it opens.
function nodeEl(n, key) {
  const cls = ["k-" + n.kind, n.taken ? "taken" : "", n.current ? "current" : ""].filter(Boolean).join(" ");
  const attrs = { class: cls, dataset: { kind: n.kind, level: String(n.level) }, "aria-current": n.current ? "step" : undefined };
  if (SEQUENCE.has(n.kind) && n.children.length === 1) {
    return [h("li", attrs, h("div", { class: "line leaf" }, lineOf(n))), ...nodeEl(n.children[0], key + ".0")];
  }
  if (n.children.length === 0) return [h("li", attrs, h("div", { class: "line leaf" }, lineOf(n)))];
  const open = S.open.has(key) || (!S.closed.has(key) && n.open);
  const folded = h("span", { class: "folded muted small" }, ` · ${count(n.size)} construct${n.size === 1 ? "" : "s"} inside, folded`);
  const details = h("details", { open }, h("summary", {}, lineOf(n), folded));
  const ul = h("ul", {});
  details.append(ul);
  let rendered = false;
  const renderChildren = () => {
    if (rendered) return;
    rendered = true;
    n.children.forEach((ch, i) => ul.append(...nodeEl(ch, key + "." + i)));
  };
  if (open) renderChildren();
  details.addEventListener("toggle", () => {
    if (details.open) {
      renderChildren();
      S.open.add(key);
      S.closed.delete(key);
    } else {
      S.closed.add(key);
      S.open.delete(key);
    }
  });
  return [h("li", attrs, details)];
}

function stepTitle(r, n) {
  if (r.kind === "inputs_applied") return r.rolledBackBy !== undefined ? "Step" : `Step ${n}`;
  return KIND_NAMES[r.kind] || r.kind;
}

function renderTimeline(chain, before) {
  const ol = $("timeline");
  const old = new Map(before.map((r) => [r.seq, r]));
  let n = 0;
  const items = S.history.map((r) => {
    if (r.kind === "inputs_applied" && r.rolledBackBy === undefined) n++;
    const rb = r.rolledBackBy !== undefined;
    const li = h("li", { id: r.txId ? "tx-" + r.txId : undefined, class: `k-${r.kind}${rb ? " rolled-back" : ""}`, dataset: { seq: String(r.seq), kind: r.kind, rolledBack: rb ? String(r.rolledBackBy) : undefined } });
    const head = h("div", { class: "step-head", title: `History seq ${count(r.seq)}: this record's number in the follower's log` },
      h("span", { class: "step-title" }, stepTitle(r, n)),
      rb ? h("span", { class: "badge rolled-back" }, "rolled back") : null,
      h("span", { class: "small" }, blockEl(r.block)),
      r.txId ? h("span", { class: "small" }, "tx ", h("a", { href: pageURL("ui/transaction", { id: r.txId }), class: "mono", title: "The transaction " + r.txId }, short(r.txId, 10, 6)), copyButton(r.txId), extLink("tx", r.txId)) : null);
    li.append(head);
    const body = h("div", { class: "step-body" }, stepBody(r, chain));
    li.append(body);
    if (rb) {
      const note = h("p", { class: "rollback-note small" }, `Rolled back by the rollback at seq ${count(r.rolledBackBy)} (the follower's record of it)`);
      li.append(note);
      rollbackMarker(r.rolledBackBy).then((m) => {
        if (m && m.block) note.textContent = `Rolled back by the rollback at seq ${count(r.rolledBackBy)}, to ${blockText(m.block)}: its block is no longer on the chain.`;
      });
    }
    const was = old.get(r.seq);
    if (S.loaded) {
      if (!was) flash(li, "new");
      else if (rb && was.rolledBackBy === undefined) flash(li, "rollback");
      if (li.dataset.flashed) S.flashed.set(r.seq, li.dataset.flashed);
      else if (S.flashed.has(r.seq)) li.dataset.flashed = S.flashed.get(r.seq); // (drawn again: it keeps saying so, without flashing again)
    }
    return li;
  });
  fill(ol, items);
  if (location.hash && !S.scrolled) {
    const target = document.getElementById(location.hash.slice(1));
    if (target) {
      S.scrolled = true;
      target.scrollIntoView({ block: "center" });
      flash(target, "update");
    }
  }
}

function stepBody(r, chain) {
  const p = r.payload || {};
  switch (r.kind) {
    case "contract_created":
      return [
        h("p", {}, `The contract was created with ${assets(p.assets)} locked.`),
        p.tags && Object.keys(p.tags).length ? h("p", { class: "small" }, "Tags: ", Object.keys(p.tags).map((t) => h("span", { class: "tag" }, t))) : null,
      ];
    case "inputs_applied": {
      const inputs = p.inputs || [];
      const prev = chain.at.get(p.input);
      const iv = p.interval || {};
      return [
        inputs.length
          ? h("ul", { class: "inputs" }, inputs.map((i) => h("li", { dataset: { input: inputKind(i) } }, input(i))))
          : h("p", { dataset: { input: "none" } }, noInputs(prev, iv)),
        h("p", { class: "small muted" }, "Valid ",
          iv.from !== null && iv.from !== undefined ? ["from ", timeEl(Number(iv.from), { rel: false })] : "from the beginning of time",
          " ", iv.to !== null && iv.to !== undefined ? ["to ", timeEl(Number(iv.to), { rel: false })] : "with no end",
          ` (slots ${iv.invalidBefore ?? "–"} to ${iv.invalidHereafter ?? "–"})`),
        p.payouts && p.payouts.length ? [h("p", { class: "small" }, "Paid out:"), h("ul", {}, p.payouts.map((x) => h("li", {}, payout(x))))] : null,
        p.closed ? h("p", {}, h("strong", {}, "This step closed the contract.")) : null,
      ];
    }
    case "payout_withdrawn":
      return h("ul", {}, (p.payouts || []).map((x) => {
        const made = S.payouts.find((y) => y.payoutId === x.payoutId);
        return h("li", {}, `${party({ role_token: x.role })} withdrew ${made ? assets(made.assets) : "the payout"} (payout ${shortContractId(x.payoutId)})`);
      }));
    case "apply_inputs_rejected":
      return h("p", {}, `A transaction spent the contract but could not be read as a Marlowe step: ${p.reason || "no reason given"}.`);
    default:
      return null;
  }
}

// ---- next ----

let nextRun = 0;
async function renderNext() {
  const el = $("next");
  const c = S.contract;
  if (c.status === "closed" || !c.currentContract) {
    S.applicable = null;
    fill(el, h("p", { class: "muted" }, "Nothing: the contract is closed.",
      S.payouts.some((p) => p.status === "available") ? " Its role payouts wait to be withdrawn by the holders of the role tokens." : ""));
    return;
  }
  // "Now" is never before the state's minTime (a step's validity may start
  // a moment ahead of this clock): an interval ending before it is refused.
  const minTime = c.state && c.state.minTime !== undefined ? Number(c.state.minTime) : 0;
  const start = S.nextAt ?? Math.max(Date.now(), minTime);
  const deadline = nextDeadline(c.currentContract, start);
  const end = Math.min(start + 10 * 60 * 1000, deadline !== null ? deadline - 1 : Infinity);
  const run = ++nextRun;
  let next;
  try {
    next = await get(contractPath(c.contractId, "/next"), { validityStart: new Date(start).toISOString(), validityEnd: new Date(end).toISOString() });
  } catch (e) {
    if (run !== nextRun) return;
    if (e instanceof ApiError && e.code === "contract_closed") {
      // It closed after the contract was read: read it again.
      fill(el, h("p", { class: "muted" }, "The contract has just closed."));
      refresh();
      return;
    }
    if (e instanceof ApiError && e.code === "bad_interval") {
      fill(el, h("p", { class: "muted" }, "Nothing can be done in that interval: it ends before the contract’s last step (minTime ", timeEl(minTime, { rel: false }), ")."));
      return;
    }
    fill(el, h("p", { class: "error" }, e instanceof ApiError ? `The API cannot say: ${e.message}` : `The API did not answer: ${e.message}`));
    return;
  }
  if (run !== nextRun) return;
  const ai = next.applicable_inputs || {};
  const items = [];
  for (const d of ai.deposits || []) {
    items.push(h("li", { dataset: { next: "deposit" } }, `${party(d.party)} can deposit ${amount(d.can_deposit, d.of_token)} into ${party(d.into_account) === party(d.party) ? "their own account" : party(d.into_account) + "’s account"}`,
      d.is_merkleized_continuation ? " (its continuation is merkleized: the input must carry it)" : "", h("span", { class: "muted small" }, ` · case ${d.case_index + 1}`)));
  }
  for (const ch of ai.choices || []) {
    items.push(h("li", { dataset: { next: "choice" } }, `${party(ch.for_choice.choice_owner)} can choose ${bounds(ch.can_choose_between)} for “${ch.for_choice.choice_name}”`,
      ch.is_merkleized_continuation ? " (merkleized continuation)" : "", h("span", { class: "muted small" }, ` · case ${ch.case_index + 1}`)));
  }
  if (ai.notify) items.push(h("li", { dataset: { next: "notify" } }, "Anyone can notify the contract", h("span", { class: "muted small" }, ` · case ${ai.notify.case_index + 1}`)));
  S.applicable = new Set([...(ai.deposits || []), ...(ai.choices || []), ...(ai.notify ? [ai.notify] : [])].map((x) => x.case_index));
  const when = S.nextAt === null ? "now" : "at that time";
  fill(el,
    h("p", { class: "small muted" }, "For a transaction valid from ", timeEl(start, { rel: S.nextAt === null ? false : true }), " to ", timeEl(end, { rel: false }), "."),
    next.can_reduce ? h("p", { dataset: { next: "reduce" } }, `The contract can move on ${when} without any input: a deadline has passed (or it has payments or conditions to work through). Anyone may apply an empty transaction.`) : null,
    items.length ? h("ul", {}, items) : next.can_reduce ? null : h("p", { class: "muted" }, `Nothing can be done ${when}.`),
    h("p", { class: "small" }, h("button", { type: "button", id: "next-min" }, "Just after the last step"), " ", h("span", { class: "muted" }, "(the state’s minTime: see what the parties could do then)")),
  );
  $("next-min").addEventListener("click", () => setNextAt(Number(c.state.minTime)));
  // The "can be done now" marks in the tree follow this answer.
  S.nextKey = [...S.applicable].join(",") + (next.can_reduce ? "r" : "");
  const chain = chainOf(S.history, c);
  renderTree(c, chain);
}

function setNextAt(ms) {
  S.nextAt = ms;
  const input = $("next-at");
  if (ms === null) input.value = "";
  else {
    const d = new Date(ms);
    const local = new Date(d.getTime() - d.getTimezoneOffset() * 60000);
    input.value = local.toISOString().slice(0, 19);
  }
  renderNext();
}

// ---- start ----

async function main() {
  chrome("ui/contract");
  tickRelative();
  if (!id) {
    fill($("load-error"), "No contract id: open this page from the contracts list, or add ?id=TXID%23INDEX.");
    $("load-error").hidden = false;
    return;
  }
  fill($("title-id"), shortContractId(id));
  await boot();
  S.network = site.network;
  startLive();
  for (const r of document.querySelectorAll('input[name="view"]')) {
    r.addEventListener("change", () => {
      S.view = r.value;
      S.open.clear();
      S.closed.clear();
      renderTree(S.contract, chainOf(S.history, S.contract));
    });
  }
  $("expand").addEventListener("click", () => {
    let opened = 0;
    const openAll = () => {
      const closed = [...$("tree").querySelectorAll("details:not([open])")];
      for (const d of closed) {
        if (opened++ > 3000) return;
        d.open = true;
      }
      if (closed.length && opened <= 3000) setTimeout(openAll, 0);
    };
    openAll();
  });
  $("collapse").addEventListener("click", () => {
    S.open.clear();
    S.closed.clear();
    S.treeKey = "";
    renderTree(S.contract, chainOf(S.history, S.contract));
  });
  wireSource(() => S.contract);
  $("next-at").addEventListener("change", (ev) => {
    const v = ev.target.value;
    setNextAt(v ? new Date(v).getTime() : null);
  });
  $("next-now").addEventListener("click", () => setNextAt(null));
  setInterval(() => {
    if (S.contract && S.nextAt === null && S.contract.status === "open") renderNext();
  }, 30000);
  await refresh();
}

main();
