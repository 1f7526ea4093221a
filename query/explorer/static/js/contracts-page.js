// The contracts page: newest first, with the query API's filters, a type
// filter, numbered pages and a search box; each row with its type, value
// locked and last action in words (read for the rows shown, and from the
// event stream for the rows it changes). Kept current by the browser's one
// event stream (new contracts appear, changed rows flash, rows a rollback
// changed or removed flash red).

import { ApiError, get, pageURL } from "./api.js";
import { assets as assetsText, assetsEmpty, count, shortContractId, slotTime } from "./format.js";
import { runSearch } from "./search-run.js";
import { ALL_TYPES, tagType } from "./types.js";
import { $, ago, banner, boot, chrome, fill, flash, follow, h, showTip, site, tickRelative } from "./ui.js";

const FILTERS = ["status", "roleCurrency", "tag", "partyAddress", "partyRole"];
const GONE_MS = 5000;
const SCAN_MAX = 500; // contracts a type filter reads for one page at most
const COLUMNS = 8;

const state = {
  filters: {},
  type: "", // the type filter (read in the page)
  limit: 25,
  cursor: "",
  page: 1,
  cursors: [], // the cursors of the pages before this one, when known
  rows: new Map(), // contractId -> contract header shown
  gone: new Map(), // contractId -> {row, until}: rows a rollback removed, shown struck through for a while
  loaded: false,
  shownSeq: null,
  live: null,
  busy: false,
  gen: 0, // bumped when the filters or the page change
  again: null, // {minSeq, rollback} of a refresh asked while one ran
  total: null,
};

// ---- the URL ----

function readLocation() {
  const q = new URLSearchParams(location.search);
  state.filters = {};
  for (const k of FILTERS) if (q.get(k)) state.filters[k] = q.get(k);
  state.type = q.get("type") || "";
  state.limit = Number(q.get("limit")) || 25;
  state.cursor = q.get("cursor") || "";
  state.page = state.cursor ? Math.max(2, Number(q.get("page")) || 2) : 1;
  readFiltersIntoForm();
}

function writeLocation(push) {
  const params = { ...state.filters };
  if (state.type) params.type = state.type;
  if (state.limit !== 25) params.limit = state.limit;
  if (state.cursor) {
    params.cursor = state.cursor;
    params.page = state.page;
  }
  const u = pageURL("", params);
  if (push) history.pushState(null, "", u);
  else history.replaceState(null, "", u);
}

function readFiltersIntoForm() {
  const form = $("filters");
  for (const k of FILTERS) form.elements[k].value = state.filters[k] || "";
  form.elements.type.value = state.type;
  form.elements.limit.value = String(state.limit);
}

// ---- reading the list ----

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
    const page = state.type ? await scanByType(minSeq, gen) : await get("contracts", { ...state.filters, order: "desc", limit: state.limit, cursor: state.cursor, minSeq });
    if (gen !== state.gen || page === null) {
      // The filters or the page changed meanwhile: this answer is not theirs.
      state.again = state.again || { minSeq: 0, rollback: null };
      return;
    }
    render(page, rollback);
    state.shownSeq = page.seq;
    showTip({ ...page.block, seq: page.seq });
    if (state.live) state.live.loaded();
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

// scanByType reads the list, newest first from the page's cursor, a
// page's worth at a time, until it has a page of contracts of the type or
// has read SCAN_MAX: the type comes from a contract's tags, or else from
// its shape (its contract, read once per contract). It stops at the end of
// what it read (the next page starts there), so a page may hold a few more
// than the page's size. It answers as a page of the API would, with
// scanned (how many it read).
async function scanByType(minSeq, gen) {
  const results = [];
  let cursor = state.cursor;
  let scanned = 0;
  let first = null;
  for (;;) {
    const page = await get("contracts", { ...state.filters, order: "desc", limit: state.limit, cursor, minSeq: first ? undefined : minSeq });
    if (gen !== state.gen) return null;
    first = first || page;
    scanned += page.results.length;
    fill($("summary"), `Looking for ${state.type} contracts: ${count(scanned)} read…`);
    await typesOf(page.results);
    if (gen !== state.gen) return null;
    results.push(...page.results.filter((c) => info.get(c.contractId)?.type?.type === state.type));
    cursor = page.cursor || "";
    if (!cursor || results.length >= state.limit || scanned >= SCAN_MAX) break;
  }
  return { ...first, results, cursor, total: null, scanned };
}

function render(page, rollback) {
  const tbody = $("contracts").tBodies[0];
  $("contracts").dataset.query = new URLSearchParams({ ...state.filters, ...(state.type ? { type: state.type } : {}), cursor: state.cursor }).toString();
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
    const key = "flashed" + kind[0].toUpperCase() + kind.slice(1);
    if (n) table.dataset[key] = String(Number(table.dataset[key] || 0) + n);
  }
  state.rows = new Map(shown.map((c) => [c.contractId, c]));
  state.loaded = true;
  state.nextCursor = page.cursor || "";
  if (page.total !== undefined && page.total !== null) state.total = Number(page.total);
  else if (!state.cursor) state.total = null;
  renderPager(page);
  renderSummary(page);
  if (page.results.length === 0) {
    const what = Object.keys(state.filters).length || state.type ? " matching the filters" : "";
    fill(tbody, h("tr", {}, h("td", { colspan: COLUMNS, class: "muted" }, `No contracts${what}${state.cursor ? " on this page" : " yet"}. New ones appear here as blocks arrive.`)));
  }
  enrich(page.results);
}

function renderSummary(page) {
  const filtered = Object.keys(state.filters).length > 0;
  const parts = [];
  if (state.type) parts.push(`${count(page.results.length)} ${state.type} contract${page.results.length === 1 ? "" : "s"} among the ${count(page.scanned)} newest read${state.cursor ? " on this page" : ""}` + (filtered ? ", matching the filters" : ""));
  else {
    if (state.total !== null) parts.push(`${count(state.total)} contracts${filtered ? " matching the filters" : ""}`);
    else if (filtered) parts.push("matching the filters");
    parts.push(page.results.length === 0 ? "none to show" : `showing ${page.results.length}`);
  }
  const t = page.block ? slotTime(site.network, page.block.slot) : null;
  fill($("summary"), parts.join(" · "), " · as of ", h("span", { title: `History seq ${count(page.seq)}: the follower's newest record this answer reflects` }, page.block ? `block ${count(page.block.blockNo)}` : "the start"),
    t !== null ? [" (", ago(t), ")"] : null);
  renderTotals();
}

// The totals of GET /stats (every contract, not only the page's), read at
// most every ten seconds: the open contracts and the value they lock, the
// payouts waiting to be withdrawn.
const totals = { at: 0, stats: null, busy: false };

async function renderTotals() {
  const el = $("totals");
  const draw = () => {
    const st = totals.stats;
    if (!st) return;
    fill(el, h("span", { dataset: { open: String(st.contracts.open) } }, `${count(st.contracts.open)} of ${count(st.contracts.total)} contracts open, locking `),
      h("strong", { id: "value-locked", title: "The value of every open contract's output, added up (GET /stats)" }, assetsEmpty(st.valueLocked) ? "nothing" : assetsText(st.valueLocked)),
      " · ", h("a", { href: pageURL("ui/payouts") }, `${count(st.payoutsAvailable.count)} payout${st.payoutsAvailable.count === 1 ? "" : "s"} to withdraw`),
      st.payoutsAvailable.count ? ` (${assetsText(st.payoutsAvailable.assets)})` : "");
  };
  draw();
  if (totals.busy || Date.now() - totals.at < 10000) return;
  totals.busy = true;
  try {
    totals.stats = await get("stats");
    totals.at = Date.now();
    draw();
  } catch {
    /* the totals are left as they were */
  } finally {
    totals.busy = false;
  }
}

function renderPager(page) {
  const pages = state.total !== null && !state.type ? Math.max(1, Math.ceil(state.total / state.limit)) : null;
  $("next").disabled = !page.cursor;
  $("prev").disabled = state.page <= 1;
  $("newest").disabled = state.page <= 1;
  $("page-no").textContent = pages !== null ? `page ${count(state.page)} of ${count(pages)}` : `page ${count(state.page)}`;
  const jump = $("jump");
  jump.hidden = Boolean(state.type); // a type filter reads pages in the browser: no jumping
  const input = jump.elements.page;
  input.max = pages !== null ? String(pages) : "";
  input.placeholder = pages !== null ? `1–${pages}` : "";
}

function union(a, b) {
  if (!a) return b || null;
  if (!b) return a;
  return new Set([...a, ...b]);
}

function signature(c) {
  return [c.status, c.steps, c.lastSeq, c.gone ? 1 : 0].join("/");
}

// ---- a row ----

const blockTime = (b) => (b ? slotTime(site.network, b.slot) : null);
const blockNote = (b) => (b ? `block ${count(b.blockNo)}, slot ${count(b.slot)}` : "");

function row(c) {
  const tags = Object.keys(c.tags || {});
  const tr = h("tr", { dataset: { id: c.contractId, seq: String(c.seq), lastSeq: String(c.lastSeq), steps: String(c.steps) }, class: c.gone ? "gone" : undefined },
    h("td", { class: "c-id", dataset: { label: "Contract" } },
      h("a", { href: pageURL("ui/contract", { id: c.contractId }), title: c.contractId, class: "mono" }, shortContractId(c.contractId)),
      c.gone ? h("span", { class: "badge rolled-back" }, " rolled back") : null,
      tags.length ? h("span", { class: "tags" }, tags.map((t) => h("a", { class: "tag", href: pageURL("", { tag: t }), title: "Contracts tagged " + t }, t))) : null),
    h("td", { class: "c-type", dataset: { label: "Type", col: "type" } }),
    h("td", { class: "c-status", dataset: { label: "Status" } }),
    h("td", { class: "c-value num", dataset: { label: "Value locked", col: "value" } }),
    h("td", { class: "c-action", dataset: { label: "Last action", col: "action" } }),
    h("td", { class: "c-created", dataset: { label: "Created" } }, ago(blockTime(c.block), blockNote(c.block))),
    h("td", { class: "c-activity", dataset: { label: "Last activity" } }, ago(blockTime(c.lastBlock), blockNote(c.lastBlock))),
    h("td", { class: "c-steps num", dataset: { label: "Steps" } }, count(c.steps)),
  );
  drawInfo(tr, c);
  return tr;
}

// drawInfo fills a row's type, value and last action from what is known
// (failed: the read failed; the row says so).
function drawInfo(tr, c, failed = false) {
  const inf = info.get(c.contractId) || {};
  const cell = (col) => tr.querySelector(`[data-col="${col}"]`);
  const type = inf.type || tagType(c.tags);
  const dots = h("span", { class: "muted", "aria-label": "reading" }, failed ? "?" : "…");
  fill(cell("type"), type ? h("span", { title: type.from === "tag" ? `From its tag “${type.tag}”` : `From its shape: ${type.why}` }, type.type, type.from === "shape" ? h("span", { class: "muted" }, "*") : null) : dots);
  // (The stream may have told a newer state than the row's read: it shows.)
  const fresh = (k) => (inf[k + "Seq"] ?? -1) >= c.lastSeq;
  const pending = () => (failed ? h("span", { class: "muted", title: "The API did not answer; the row is read again when the contract changes" }, "?") : h("span", { class: "muted", "aria-label": "reading" }, "…"));
  fill(cell("value"), fresh("assets") ? (assetsEmpty(inf.assets) ? h("span", { class: "muted" }, "nothing") : assetsText(inf.assets)) : pending());
  fill(cell("action"), fresh("action") ? inf.action : pending());
  // A step the stream told closed the contract after the row was read: the
  // row says closed at once, as its last action does (the row's next read
  // follows within a second).
  const closedAhead = c.status === "open" && (inf.closedSeq ?? -1) > c.lastSeq;
  const status = tr.querySelector(".c-status");
  if (status) fill(status, h("span", { class: "badge " + (closedAhead ? "closed" : c.status), title: closedAhead ? "Closed by a step just told by the live updates" : undefined, dataset: closedAhead ? { ahead: String(inf.closedSeq) } : {} }, closedAhead ? "closed" : c.status));
}

// ---- what the rows need beyond the list: type, value, last action ----

// info: contractId -> {type, assets, assetsSeq, action, actionSeq}: the
// value locked and the last action as of a seq (the row's lastSeq or a
// newer one the stream told), the type;
// told by where the browser's stream is held (rowinfo.js), which reads
// them once for all tabs and keeps them current from the stream.
const info = new Map();
const INFO_MAX = 5000;
const waiting = new Map(); // contractId -> resolve functions (a scan waiting for types)

function noteInfo(id, inf, failed) {
  info.delete(id);
  info.set(id, inf);
  if (info.size > INFO_MAX) info.delete(info.keys().next().value);
  const c = state.rows.get(id);
  const tr = c && document.querySelector(`#contracts tr[data-id="${CSS.escape(id)}"]`);
  if (tr && !c.gone) drawInfo(tr, c, failed);
  if ((inf.type || failed) && waiting.has(id)) {
    for (const resolve of waiting.get(id)) resolve();
    waiting.delete(id);
  }
}

const rowOf = (c) => ({ contractId: c.contractId, seq: c.seq, lastSeq: c.lastSeq, steps: c.steps, tags: c.tags });

function needs(c) {
  const inf = info.get(c.contractId) || {};
  return !inf.type || !((inf.assetsSeq ?? -1) >= c.lastSeq) || !((inf.actionSeq ?? -1) >= c.lastSeq);
}

// enrich asks for what the rows shown lack.
function enrich(rows) {
  const want = rows.filter((c) => !c.gone && needs(c)).map(rowOf);
  if (want.length) state.live.ask({ type: "want", rows: want });
}

// typesOf makes sure the contracts' types are known (a scan by type).
function typesOf(rows) {
  const missing = rows.filter((c) => !(info.get(c.contractId) || {}).type && !tagType(c.tags));
  for (const c of rows) if (!missing.includes(c) && !(info.get(c.contractId) || {}).type) noteInfo(c.contractId, { ...(info.get(c.contractId) || {}), type: tagType(c.tags) });
  if (!missing.length) return Promise.resolve();
  const done = Promise.all(missing.map((c) => new Promise((resolve) => waiting.set(c.contractId, [...(waiting.get(c.contractId) || []), resolve]))));
  state.live.ask({ type: "want", rows: missing.map(rowOf), onlyType: true });
  return done;
}

// ---- live ----

// The slots of the records seen lately, by contract: what a rollback undoes.
const seen = new Map();
const SEEN_MAX = 5000;

// noteRecord notes a record's block, and for a rollback returns the
// contracts it changed (null for other records).
function noteRecord(r) {
  if (r.kind === "rolled_back") {
    const changed = new Set();
    const to = Number(r.payload && r.payload.to ? r.payload.to.slot ?? 0 : 0);
    for (const [id, slots] of seen) {
      if (slots.some((x) => x > to)) {
        changed.add(id);
        seen.set(id, slots.filter((x) => x <= to));
      }
    }
    return changed;
  }
  if (!r.contractId || !r.block) return null;
  const slots = seen.get(r.contractId) || [];
  seen.delete(r.contractId); // re-inserted last: the map stays in order of activity
  slots.push(Number(r.block.slot));
  seen.set(r.contractId, slots.slice(-20));
  if (seen.size > SEEN_MAX) seen.delete(seen.keys().next().value);
  return null;
}

// startLive hears the browser's one event stream (every record): a
// burst of records that may change the list reads it again. Without
// filters every record may; with filters, creations, rollbacks, records
// of the contracts shown and, with a party filter, steps (a revealed
// continuation can name a party).
function startLive() {
  let rollback = null; // the contracts the rollbacks of the burst changed
  state.live = follow({
    shownSeq: () => (state.loaded ? state.shownSeq : null),
    onInfo: noteInfo,
    onRecord: (r) => {
      const changed = noteRecord(r);
      if (changed) rollback = union(rollback, changed);
    },
    relevant: (r) => {
      const f = state.filters;
      if (!FILTERS.some((k) => f[k]) && !state.type) return true;
      if (r.kind === "contract_created" || r.kind === "rolled_back" || state.rows.has(r.contractId)) return true;
      return r.kind === "inputs_applied" && Boolean(f.partyAddress || f.partyRole);
    },
    onChange: (minSeq) => {
      const rb = rollback;
      rollback = null;
      refresh({ minSeq: minSeq || undefined, rollback: rb });
    },
  });
}

// ---- search ----

// search runs the search box (search.js's runSearch); what it finds to
// filter by filters the list.
function search(text) {
  return runSearch(text, $("search-result"), (k, v) => {
    state.filters = { [k]: v };
    state.type = "";
    toFirstPage();
    readFiltersIntoForm();
    writeLocation(true);
    restart();
  });
}

// ---- paging ----

function toFirstPage() {
  state.cursor = "";
  state.page = 1;
  state.cursors = [];
}

function go(page, cursor) {
  state.page = page;
  state.cursor = cursor;
  state.rows = new Map();
  state.loaded = false;
  state.gen++;
  writeLocation(true);
  refresh();
}

// cursorOf finds the cursor of page n (after (n-1)*limit contracts): the
// list is read in steps of up to 1,000, headers only.
async function cursorOf(n) {
  let skip = (n - 1) * state.limit;
  let cursor = "";
  while (skip > 0) {
    const step = Math.min(1000, skip);
    const page = await get("contracts", { ...state.filters, order: "desc", limit: step, cursor });
    if (!page.cursor) return null; // fewer contracts than that
    cursor = page.cursor;
    skip -= step;
  }
  return cursor;
}

async function jumpTo(n) {
  const out = $("jump-result");
  fill(out);
  if (!Number.isInteger(n) || n < 1) {
    fill(out, h("span", { class: "error" }, "A page is a whole number from 1."));
    return;
  }
  if (n === 1) return go(1, "");
  fill(out, `Finding page ${count(n)}…`);
  try {
    const cursor = await cursorOf(n);
    if (cursor === null) {
      fill(out, h("span", { class: "error" }, `There is no page ${count(n)}: the list is shorter.`));
      return;
    }
    fill(out);
    state.cursors = [];
    go(n, cursor);
  } catch (e) {
    fill(out, h("span", { class: "error" }, `The API did not answer: ${e.message}`));
  }
}

function restart() {
  state.gen++;
  state.rows = new Map();
  state.gone = new Map();
  state.loaded = false;
  refresh();
}

// ---- start ----

function typeOptions() {
  const sel = $("filters").elements.type;
  sel.append(...ALL_TYPES.map((t) => h("option", { value: t }, t)));
}

async function main() {
  chrome("");
  typeOptions();
  readLocation();
  // On a narrow screen the filters start folded, unless some are set.
  if (matchMedia("(max-width: 700px)").matches && !Object.keys(state.filters).length && !state.type) $("filter-box").open = false;
  tickRelative();
  startLive();
  await boot();
  $("filters").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const form = ev.target;
    state.filters = {};
    for (const k of FILTERS) {
      const v = form.elements[k].value.trim();
      if (v) state.filters[k] = v;
    }
    state.type = form.elements.type.value;
    state.limit = Number(form.elements.limit.value) || 25;
    toFirstPage();
    writeLocation(true);
    restart();
  });
  $("filters").addEventListener("reset", () => {
    setTimeout(() => $("filters").requestSubmit(), 0);
  });
  for (const k of ["limit", "status", "type"]) $("filters").elements[k].addEventListener("change", () => $("filters").requestSubmit());
  $("search").addEventListener("submit", (ev) => {
    ev.preventDefault();
    search($("q").value);
  });
  $("next").addEventListener("click", () => {
    if (!state.nextCursor) return;
    state.cursors.push(state.cursor);
    go(state.page + 1, state.nextCursor);
  });
  $("prev").addEventListener("click", () => {
    if (state.page <= 1) return;
    if (state.cursors.length) go(state.page - 1, state.cursors.pop());
    else if (state.type) go(1, ""); // (a scan's earlier pages are not kept)
    else jumpTo(state.page - 1);
  });
  $("newest").addEventListener("click", () => {
    state.cursors = [];
    go(1, "");
  });
  $("jump").addEventListener("submit", (ev) => {
    ev.preventDefault();
    jumpTo(Number(ev.target.elements.page.value));
  });
  window.addEventListener("popstate", () => {
    readLocation();
    state.cursors = [];
    restart();
  });
  restart();
}

main();
