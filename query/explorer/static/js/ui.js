// DOM helpers shared by the pages: element building (text only, never
// HTML from data), times, the connection banner and the live tip.

import { get, pageURL } from "./api.js";
import { count, date, iso, learnClock, relative, slotTime } from "./format.js";
import { connect } from "./hub.js";
import { STALL_MS } from "./stream.js";

/** h builds an element: h("a", {href, class}, "text", child, ...). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** clear empties an element and fills it with children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** $ finds an element by id. */
export const $ = (id) => document.getElementById(id);

/** timeEl: a <time> with the date, and how far from now in a second span. */
export function timeEl(ms, { rel = true, cls } = {}) {
  const t = h("time", { datetime: iso(ms), title: iso(ms), class: cls, dataset: { ms: String(ms) } }, date(ms));
  if (!rel) return t;
  return h("span", { class: "when" }, t, " ", h("span", { class: "rel", dataset: { relms: String(ms) } }, "(" + relative(ms) + ")"));
}

/**
 * ago writes a time as how far from now ("3 min ago", "in 2 days"), the
 * date and time on hover; extra is added to the hover text (a block, a
 * slot). It is kept current by tickRelative.
 */
export function ago(ms, extra = "") {
  if (ms === null || ms === undefined || !Number.isFinite(Number(ms))) return h("span", { class: "muted" }, "–");
  return h("time", { datetime: iso(ms), title: date(ms) + (extra ? " · " + extra : ""), dataset: { agoms: String(ms) } }, relative(ms));
}

/** tickRelative refreshes every "(in 3 min)" on the page, every few seconds. */
export function tickRelative() {
  setInterval(() => {
    for (const el of document.querySelectorAll("[data-relms]")) el.textContent = "(" + relative(Number(el.dataset.relms)) + ")";
    for (const el of document.querySelectorAll("[data-agoms]")) el.textContent = relative(Number(el.dataset.agoms));
  }, 5000);
}

/** banner shows a message at the top of the page (a polite live region); kind: info, warn, ok. */
export function banner(text, kind = "info", { timeout = 0 } = {}) {
  const el = $("banner");
  if (!el) return;
  if (!text) {
    el.hidden = true;
    el.textContent = "";
    return;
  }
  el.hidden = false;
  el.className = "banner " + kind;
  el.textContent = text;
  clearTimeout(banner.timer);
  if (timeout) banner.timer = setTimeout(() => banner(""), timeout);
}

// ---- the page's frame: navigation, network, the live tip ----

const NAV = [
  ["", "Contracts"],
  ["ui/payouts", "Payouts"],
  ["ui/status", "Status"],
  ["ui/api", "API"],
];

/** site is what every page knows once boot() has read it: the network, its explorer links. */
export const site = { network: "", links: {}, apiDocs: [], status: null };

/**
 * chrome draws the page's header (the brand, the navigation with the
 * current page marked, the network's badge and the live tip) into
 * <header id="top"> and the footer's note.
 */
export function chrome(current) {
  const top = $("top");
  if (!top) return;
  fill(top,
    h("a", { class: "brand", href: pageURL("") }, h("img", { src: pageURL("ui/icon.svg"), alt: "" }), "marlowe-follower"),
    h("span", { id: "network", class: "badge network", hidden: true, title: "The Cardano network this follower follows" }),
    h("nav", { "aria-label": "Pages" }, h("ul", {}, NAV.map(([p, label]) => h("li", {}, h("a", { href: pageURL(p), "aria-current": p === current ? "page" : undefined }, label))))),
    h("p", { id: "tip", dataset: { state: "connecting" }, role: "status", "aria-live": "off" },
      h("span", { class: "tip-text" }), " ", h("span", { class: "tip-state" }, "connecting")));
}

/**
 * boot reads what every page needs once: /status (the network and its slot
 * clock, for block times) and the explorer's configuration (ui/config.json:
 * the Cardano explorer links of this network). Failures leave them out.
 */
export async function boot() {
  const [st, cfg] = await Promise.all([get("status").catch(() => null), get("ui/config.json").catch(() => null)]);
  if (st) {
    site.status = st;
    site.network = st.network || "";
    learnClock(st.network, st.slotClock);
    const badge = $("network");
    if (badge) {
      badge.hidden = false;
      badge.textContent = site.network;
      badge.dataset.network = site.network;
    }
  }
  if (cfg && cfg.links) site.links = cfg.links;
  if (cfg && Array.isArray(cfg.apiDocs)) site.apiDocs = cfg.apiDocs;
  return site;
}

// The tip in the header: one moment (a block and the seq of the same
// state), never older than what it showed.
const tipShown = { seq: -1, block: null, state: "connecting", since: Date.now() };

/**
 * showTip writes the tip in the header: the block (with how long ago it
 * was made) of the newest state the page was told, and the stream's
 * state. tip is {slot, blockNo, hash, seq}: a block and the seq of that
 * same state.
 */
export function showTip(tip, state) {
  if (state && state !== tipShown.state) {
    tipShown.state = state;
    tipShown.since = Date.now();
  }
  if (tip && tip.blockNo !== undefined && Number(tip.seq ?? 0) >= tipShown.seq) {
    tipShown.seq = Number(tip.seq ?? 0);
    tipShown.block = tip;
  }
  // Drawn a few times a second at most (a busy chain tells many records).
  if (state) drawTip();
  else if (!tipShown.timer) tipShown.timer = setTimeout(drawTip, 250);
}

function drawTip() {
  clearTimeout(tipShown.timer);
  tipShown.timer = null;
  const el = $("tip");
  if (!el) return;
  el.dataset.state = tipShown.state;
  const b = tipShown.block;
  const text = el.querySelector(".tip-text");
  if (b) {
    const t = slotTime(site.network, b.slot);
    fill(text, `tip: block ${count(b.blockNo)}`, t !== null ? [" · ", h("time", { datetime: iso(t), title: date(t), dataset: { agoms: String(t) } }, relative(t))] : null);
    text.title = `The newest block this page was told about (block ${count(b.blockNo)}, slot ${count(b.slot)}${t !== null ? ", " + date(t) : ""}). ` +
      `History seq ${count(tipShown.seq)}: the number of the follower's newest record, which orders everything it has seen.`;
    el.dataset.seq = String(tipShown.seq);
    el.dataset.block = String(b.blockNo);
  }
  el.querySelector(".tip-state").textContent = stateLabel();
}

function stateLabel() {
  const s = tipShown.state;
  if (s === "stalled") return `stalled: no word from the service for ${Math.round((Date.now() - tipShown.since) / 1000 + STALL_MS / 1000)} s`;
  return { live: "live", resumed: "live", restarted: "live", connecting: "connecting", reconnecting: "reconnecting", failed: "offline" }[s] || s;
}

let reconnects = 0;

/**
 * follow hears the browser's one event stream (hub.js) with the banner
 * and the header's tip wired. onRecord sees every record; relevant(record)
 * says whether a record concerns the page; onChange(minSeq) asks the page
 * to read the API again as of at least minSeq: after relevant records (a
 * burst comes as one call, and calls come at most every everyMs), when
 * this tab joined the stream after the state it shows (shownSeq() is that
 * state's seq), and after a restart from the tip.
 */
export function follow({ relevant = () => true, onRecord = () => {}, onInfo = () => {}, onChange, shownSeq = () => null, burstMs = 150, everyMs = 1000 }) {
  let seenDrop = false;
  let joined = null; // the seq from which this tab is told every record
  let pending = 0;
  let timer = null;
  let last = 0; // when onChange was last called
  const flush = () => {
    timer = null;
    last = Date.now();
    const minSeq = pending;
    pending = 0;
    onChange(minSeq);
  };
  // A burst of records is one call, and calls come at most every everyMs
  // (a busy chain makes many bursts a second: the page reads the API once
  // a second, as of the newest seq).
  const changed = (seq) => {
    pending = Math.max(pending, seq || 0);
    if (timer === null) timer = setTimeout(flush, Math.max(burstMs, last + everyMs - Date.now()));
  };
  const behind = () => {
    const shown = shownSeq();
    if (joined !== null && shown !== null && shown < joined) changed(joined);
  };
  const onState = (state, cursor) => {
    showTip(null, state);
    document.documentElement.dataset.live = state;
    if (state === "reconnecting" || state === "failed") {
      seenDrop = true;
      banner("The live connection dropped: reconnecting…", "warn");
    } else if (state === "stalled") {
      seenDrop = true;
      banner("Live updates have stalled: nothing, not even a heartbeat, has come for a while. Reconnecting…", "warn");
    } else if (state === "resumed") {
      reconnects++;
      document.documentElement.dataset.reconnects = String(reconnects);
      banner(`Reconnected: live updates resumed after ${cursor ? "cursor " + cursor : "the last record"}, nothing missed.`, "ok", { timeout: 8000 });
    } else if (state === "restarted") {
      reconnects++;
      document.documentElement.dataset.reconnects = String(reconnects);
      banner("Reconnected from the tip: the page was refreshed.", "ok", { timeout: 8000 });
      changed(0);
    } else if (state === "live" && seenDrop) {
      banner("", "info");
    }
  };
  const hub = connect((m) => {
    switch (m.type) {
      case "hello":
        if (typeof m.seq === "number") {
          joined = m.seq;
          behind();
        }
        if (m.tip) showTip(m.tip);
        if (m.state) onState(m.state, m.cursor);
        break;
      case "state":
        onState(m.state, m.cursor);
        break;
      case "tip":
        showTip(m.tip);
        break;
      case "info":
        onInfo(m.id, m.info, Boolean(m.failed));
        break;
      case "record": {
        const r = m.record;
        if (r.block && r.seq !== undefined) showTip({ ...r.block, seq: r.seq });
        onRecord(r);
        if (relevant(r)) changed(r.seq);
        break;
      }
    }
  });
  setInterval(() => {
    if (tipShown.state === "stalled") showTip(null);
  }, 1000);
  return {
    hub,
    /** ask sends a request to where the stream is held (rowinfo.js: {type: "want", rows}). */
    ask: (m) => hub.ask(m),
    /** loaded: the page now shows the state of seq (its first read, or one after a restart). */
    loaded: behind,
    close: () => hub.close(),
  };
}

/** flash marks an element briefly (class flash-KIND), for rows and steps that changed. */
export function flash(el, kind) {
  el.classList.remove("flash-new", "flash-update", "flash-rollback");
  void el.offsetWidth; // restart the animation
  el.classList.add("flash-" + kind);
  el.dataset.flashed = kind;
}

/** copyable: an identifier in <code> with a button that copies it. */
export function copyable(text, shown) {
  return h("span", { class: "id" }, h("code", { title: text }, shown ?? text), copyButton(text));
}

/** copyButton: a button that copies text. */
export function copyButton(text) {
  const btn = h("button", { type: "button", class: "copy", title: "Copy " + text, "aria-label": "Copy " + text }, copyIcon());
  btn.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
      btn.replaceChildren("✓");
      setTimeout(() => btn.replaceChildren(copyIcon()), 1200);
    } catch {
      /* no clipboard (insecure context): the text can still be selected */
    }
  });
  return btn;
}

// copyIcon: two overlapping sheets (inline SVG, no font glyph needed).
function copyIcon() {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("width", "12");
  svg.setAttribute("height", "12");
  svg.setAttribute("aria-hidden", "true");
  for (const [x, y] of [[5, 1], [1, 5]]) {
    const r = document.createElementNS(ns, "rect");
    for (const [k, v] of Object.entries({ x, y, width: 10, height: 10, rx: 1.5, fill: x === 1 ? "currentColor" : "none", stroke: "currentColor", "stroke-width": 1.5, "fill-opacity": 0.25 })) r.setAttribute(k, String(v));
    svg.append(r);
  }
  return svg;
}

const LINK_TITLES = { tx: "this transaction", address: "this address", policy: "this policy" };

/**
 * extLink links an identifier to the Cardano explorer configured for the
 * network (query.uiLinks: site.links, kind tx, address or policy), or is
 * null when there is none (the devnet). It opens in a new tab and sends
 * no referrer: it is the only way a page leaves the port, when clicked.
 */
export function extLink(kind, id) {
  const tmpl = site.links && site.links[kind];
  if (!tmpl || !id) return null;
  let host = "";
  try {
    host = new URL(tmpl.replaceAll("{id}", "x")).host;
  } catch {
    return null;
  }
  return h("a", { class: "ext", href: tmpl.replaceAll("{id}", encodeURIComponent(id)), target: "_blank", rel: "noopener noreferrer external", title: `Open ${LINK_TITLES[kind] || id} on ${host}`, dataset: { ext: kind } },
    h("span", { "aria-hidden": "true" }, "↗"), h("span", { class: "visually-hidden" }, `${LINK_TITLES[kind] || id} on ${host}`));
}
