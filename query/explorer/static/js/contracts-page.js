// The contracts page: newest first, with the query API's filters, paging
// and a search box; kept current by GET /events (new contracts appear,
// changed rows flash, rows a rollback changed or removed flash red).

import { ApiError, contractPath, get, pageURL } from "./api.js";
import { count, date, learnClock, shortContractId, short, slotTime } from "./format.js";
import { $, banner, fill, flash, follow, h, showTip, tickRelative } from "./ui.js";

const FILTERS = ["status", "roleCurrency", "tag", "partyAddress", "partyRole"];
const EVENT_FILTERS = ["roleCurrency", "tag", "partyAddress", "partyRole"]; // /events has no status
const GONE_MS = 5000;

const state = {
  filters: {},
  limit: 25,
  cursor: "",
  cursors: [], // the cursors of the pages before this one
  rows: new Map(), // contractId -> contract header shown
  gone: new Map(), // contractId -> {row, until}: rows a rollback removed, shown struck through for a while
  network: "",
  loaded: false,
  live: null,
  busy: false,
  gen: 0, // bumped when the filters or the page change
  again: null, // {minSeq, rollback} of a refresh asked while one ran
};

function readLocation() {
  const q = new URLSearchParams(location.search);
  state.filters = {};
  for (const k of FILTERS) if (q.get(k)) state.filters[k] = q.get(k);
  state.limit = Number(q.get("limit")) || 25;
  state.cursor = q.get("cursor") || "";
  const form = $("filters");
  for (const k of FILTERS) form.elements[k].value = state.filters[k] || "";
  form.elements.limit.value = String(state.limit);
}

function writeLocation(push) {
  const params = { ...state.filters };
  if (state.limit !== 25) params.limit = state.limit;
  if (state.cursor) params.cursor = state.cursor;
  const u = pageURL("", params);
  if (push) history.pushState(null, "", u);
  else history.replaceState(null, "", u);
}

// rollback, when set, is the set of contracts a rollback changed: those
// with a record in a block it undid (seen on the event stream, which tells
// every record before the rollback that removes it).
async function refresh({ minSeq, rollback = null } = {}) {
  if (state.busy) {
    const a = state.again || { minSeq: 0, rollback: null };
    state.again = { minSeq: Math.max(a.minSeq || 0, minSeq || 0), rollback: union(a.rollback, rollback) };
    return;
  }
  state.busy = true;
  const gen = state.gen;
  try {
    const page = await get("contracts", { ...state.filters, order: "desc", limit: state.limit, cursor: state.cursor, minSeq });
    if (gen !== state.gen) {
      // The filters or the page changed meanwhile: this answer is not theirs.
      state.again = state.again || { minSeq: 0, rollback: null };
      return;
    }
    render(page, rollback);
    showTip({ ...page.block, seq: page.seq });
  } catch (e) {
    if (e instanceof ApiError && e.status === 400) {
      fill($("summary"), h("span", { class: "error" }, `The filters are not valid: ${e.message}`));
      fill($("contracts").tBodies[0]);
    } else if (e instanceof ApiError && e.code === "not_yet_applied") {
      state.again = { minSeq: 0, rollback }; // try again without waiting
    } else {
      banner(`The query API did not answer: ${e.message}`, "bad", { timeout: 5000 });
    }
  } finally {
    state.busy = false;
    if (state.again) {
      const a = state.again;
      state.again = null;
      setTimeout(() => refresh(a), 250);
    }
  }
}

function render(page, rollback) {
  const tbody = $("contracts").tBodies[0];
  $("contracts").dataset.query = new URLSearchParams({ ...state.filters, cursor: state.cursor }).toString();
  const before = state.rows;
  const now = Date.now();
  const next = new Map(page.results.map((c) => [c.contractId, c]));
  // Rows a rollback removed from the middle of this page stay a moment, struck through.
  const rolled = (c) => rollback !== null && rollback.has(c.contractId);
  if (state.loaded && rollback !== null) {
    const oldest = page.results.length ? page.results[page.results.length - 1].seq : -Infinity;
    for (const [id, c] of before) {
      if (!next.has(id) && c.seq >= oldest && !c.gone && rolled(c)) state.gone.set(id, { row: c, until: now + GONE_MS });
    }
  }
  for (const [id, g] of state.gone) if (g.until < now || next.has(id)) state.gone.delete(id);
  const shown = [...page.results, ...[...state.gone.values()].map((g) => ({ ...g.row, gone: true }))];
  shown.sort((a, b) => b.seq - a.seq);
  const rows = shown.map((c) => {
    const tr = row(c);
    if (!state.loaded) return tr;
    const old = before.get(c.contractId);
    if (c.gone) {
      if (!old || !old.gone) flash(tr, "rollback");
    } else if (!old) {
      flash(tr, "new");
    } else if (rolled(old)) {
      flash(tr, "rollback"); // its last activity was in a block the rollback undid
    } else if (signature(old) !== signature(c)) {
      flash(tr, "update");
    }
    return tr;
  });
  fill(tbody, rows);
  const table = $("contracts");
  for (const kind of ["new", "update", "rollback"]) {
    const n = rows.filter((tr) => tr.dataset.flashed === kind).length;
    if (n) table.dataset["flashed" + kind[0].toUpperCase() + kind.slice(1)] = String(Number(table.dataset["flashed" + kind[0].toUpperCase() + kind.slice(1)] || 0) + n);
  }
  state.rows = new Map(shown.map((c) => [c.contractId, c]));
  state.loaded = true;
  state.nextCursor = page.cursor || "";
  $("next").disabled = !page.cursor;
  $("prev").disabled = state.cursors.length === 0;
  $("newest").disabled = !state.cursor;
  $("page-no").textContent = `page ${state.cursors.length + 1}`;
  const total = page.total !== undefined && page.total !== null ? `${count(page.total)} contracts` : "";
  const what = Object.keys(state.filters).length ? "matching the filters" : "";
  fill($("summary"), [total, what, page.results.length === 0 ? "none to show" : `showing ${page.results.length}`, `as of seq ${count(page.seq)}`].filter(Boolean).join(" · "));
  if (page.results.length === 0) {
    fill(tbody, h("tr", {}, h("td", { colspan: 8, class: "muted" }, "No contracts yet" + (what ? " matching the filters" : "") + ". New ones appear here as blocks arrive.")));
  }
}

function union(a, b) {
  if (!a) return b || null;
  if (!b) return a;
  return new Set([...a, ...b]);
}

// The slots of the records seen lately, by contract: what a rollback undoes.
const seen = new Map();
const SEEN_MAX = 5000;

// noteRecords notes the records of a burst and returns the contracts its
// rollbacks changed (null when it has none).
function noteRecords(recs) {
  let changed = null;
  for (const r of recs) {
    if (r.kind === "rolled_back") {
      const to = Number(r.payload && r.payload.to ? r.payload.to.slot ?? 0 : 0);
      for (const [id, slots] of seen) {
        if (slots.some((x) => x > to)) {
          (changed = changed || new Set()).add(id);
          seen.set(id, slots.filter((x) => x <= to));
        }
      }
    } else if (r.contractId && r.block) {
      const slots = seen.get(r.contractId) || [];
      seen.delete(r.contractId); // re-inserted last: the map stays in order of activity
      slots.push(Number(r.block.slot));
      seen.set(r.contractId, slots.slice(-20));
      if (seen.size > SEEN_MAX) seen.delete(seen.keys().next().value);
    }
  }
  return changed;
}

function signature(c) {
  return [c.status, c.steps, c.lastSeq, c.gone ? 1 : 0].join("/");
}

function blockCell(b) {
  if (!b) return h("td", { class: "num" }, "–");
  const t = slotTime(state.network, b.slot);
  return h("td", { class: "num", title: t !== null ? `slot ${count(b.slot)}, ${date(t)}` : `slot ${count(b.slot)}` }, count(b.blockNo));
}

function row(c) {
  const tags = Object.keys(c.tags || {});
  const last = c.lastBlock;
  const lastTime = last ? slotTime(state.network, last.slot) : null;
  return h("tr", { dataset: { id: c.contractId, seq: String(c.seq), steps: String(c.steps) }, class: c.gone ? "gone" : undefined },
    h("td", {}, h("a", { href: pageURL("ui/contract", { id: c.contractId }), title: c.contractId, class: "mono" }, shortContractId(c.contractId)),
      c.gone ? h("span", { class: "badge rolled-back" }, " rolled back") : null),
    h("td", {}, h("span", { class: "badge " + c.status }, c.status)),
    h("td", {}, c.version),
    h("td", { class: "mono" }, c.roleTokenMintingPolicyId
      ? h("a", { href: pageURL("", { roleCurrency: c.roleTokenMintingPolicyId }), title: "Contracts of roles currency " + c.roleTokenMintingPolicyId }, short(c.roleTokenMintingPolicyId, 8, 4))
      : h("span", { class: "muted" }, "no roles")),
    h("td", {}, tags.map((t) => h("a", { class: "tag", href: pageURL("", { tag: t }), title: "Contracts tagged " + t }, t))),
    blockCell(c.block),
    h("td", { class: "num" }, count(c.steps)),
    h("td", {}, last ? h("span", { title: `slot ${count(last.slot)}${lastTime !== null ? ", " + date(lastTime) : ""}` }, `block ${count(last.blockNo)}`) : "–",
      " ", h("span", { class: "muted small" }, `seq ${count(c.lastSeq)}`)),
  );
}

function startLive() {
  if (state.live) state.live.close();
  const params = { from: "tip" };
  let any = false;
  for (const k of EVENT_FILTERS) {
    if (state.filters[k]) {
      params[k] = state.filters[k];
      any = true;
    }
  }
  if (!any) params.all = "true";
  state.live = follow(params, {
    onRecords: (recs) => {
      const minSeq = Math.max(...recs.map((r) => r.seq || 0));
      const changed = noteRecords(recs);
      const rolledBack = recs.some((r) => r.kind === "rolled_back");
      refresh({ minSeq, rollback: rolledBack ? changed || new Set() : null });
    },
    onRestart: () => refresh(),
  });
}

// Search: a contract id opens it; a transaction id opens the contract it
// created, stepped or withdrew from (at that step); a roles currency, an address, a party
// role or anything else (a tag) filters the list.
async function search(text) {
  const out = $("search-result");
  const q = text.trim();
  fill(out);
  if (!q) return;
  const go = (id, hash = "") => (location.href = pageURL("ui/contract", { id }) + hash);
  const filter = (k, v) => {
    state.filters = { [k]: v };
    state.cursor = "";
    state.cursors = [];
    readFiltersIntoForm();
    writeLocation(true);
    restart();
    fill(out, `Showing the contracts with ${k} ${v}.`);
  };
  try {
    if (/^[0-9a-fA-F]{64}#\d+$/.test(q)) {
      await get(contractPath(q.toLowerCase()));
      return go(q.toLowerCase());
    }
    if (/^[0-9a-fA-F]{64}$/.test(q)) {
      const tx = q.toLowerCase();
      fill(out, "Looking for the transaction…");
      const found = await findTx(tx);
      if (found) return go(found.contractId, found.hash);
      fill(out, h("span", { class: "error" }, "This transaction created no contract, stepped none and withdrew no payout (as of the API’s current seq)."));
      return;
    }
    if (/^[0-9a-fA-F]{56}$/.test(q)) return filter("roleCurrency", q.toLowerCase());
    if (/^[0-9a-fA-F]{56}\..*$/.test(q)) return filter("partyRole", q);
    if (/^(addr|addr_test)1[02-9ac-hj-np-z]+$/.test(q)) return filter("partyAddress", q);
    return filter("tag", q);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) fill(out, h("span", { class: "error" }, `No contract ${q} (as of the API’s current seq).`));
    else fill(out, h("span", { class: "error" }, `The search failed: ${e.message}`));
  }
}

// findTx tries, one at a time: the step the transaction made (of
// whichever contract: GET /transactions/{txId}), the contract it created
// (its first outputs), the withdrawal it made.
async function findTx(tx) {
  const tryGet = async (path) => {
    try {
      return await get(path);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return null;
      throw e;
    }
  };
  const step = await tryGet("transactions/" + tx);
  if (step) return { contractId: step.contractId, hash: "#tx-" + tx };
  for (let ix = 0; ix < 3; ix++) {
    const c = await tryGet(contractPath(`${tx}#${ix}`));
    if (c) return { contractId: c.contractId, hash: "" };
  }
  const w = await tryGet("withdrawals/" + tx);
  if (w && w.payouts && w.payouts.length) return { contractId: w.payouts[0].contractId, hash: "#tx-" + tx };
  return null;
}

function readFiltersIntoForm() {
  const form = $("filters");
  for (const k of FILTERS) form.elements[k].value = state.filters[k] || "";
}

function restart() {
  state.gen++;
  state.rows = new Map();
  state.gone = new Map();
  state.loaded = false;
  refresh();
  startLive();
}

async function main() {
  readLocation();
  tickRelative();
  try {
    const st = await get("status");
    state.network = st.network;
    learnClock(st.network, st.slotClock);
  } catch {
    /* times of blocks are left out */
  }
  $("filters").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const form = ev.target;
    state.filters = {};
    for (const k of FILTERS) {
      const v = form.elements[k].value.trim();
      if (v) state.filters[k] = v;
    }
    state.limit = Number(form.elements.limit.value) || 25;
    state.cursor = "";
    state.cursors = [];
    writeLocation(true);
    restart();
  });
  $("filters").addEventListener("reset", () => {
    setTimeout(() => $("filters").requestSubmit(), 0);
  });
  $("filters").elements.limit.addEventListener("change", () => $("filters").requestSubmit());
  $("filters").elements.status.addEventListener("change", () => $("filters").requestSubmit());
  $("search").addEventListener("submit", (ev) => {
    ev.preventDefault();
    search($("q").value);
  });
  $("next").addEventListener("click", () => {
    if (!state.nextCursor) return;
    state.cursors.push(state.cursor);
    state.cursor = state.nextCursor;
    state.rows = new Map();
    state.loaded = false;
    state.gen++;
    writeLocation(true);
    refresh();
  });
  $("prev").addEventListener("click", () => {
    state.cursor = state.cursors.pop() || "";
    state.rows = new Map();
    state.loaded = false;
    state.gen++;
    writeLocation(true);
    refresh();
  });
  $("newest").addEventListener("click", () => {
    state.cursor = "";
    state.cursors = [];
    state.rows = new Map();
    state.loaded = false;
    state.gen++;
    writeLocation(true);
    refresh();
  });
  window.addEventListener("popstate", () => {
    readLocation();
    state.cursors = [];
    restart();
  });
  restart();
}

main();
