// DOM helpers shared by the pages: element building (text only, never
// HTML from data), times, the connection banner and the live tip.

import { Live } from "./api.js";
import { count, date, iso, relative } from "./format.js";

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

/** showTip writes the live tip in the header. */
export function showTip(tip, state) {
  const el = $("tip");
  if (!el) return;
  if (state) el.dataset.state = state;
  if (tip) {
    el.querySelector(".tip-text").textContent = `block ${count(tip.blockNo)} · seq ${count(tip.seq ?? 0)}`;
  }
  const label = { live: "live", resumed: "live", restarted: "live", connecting: "connecting", reconnecting: "reconnecting", failed: "offline" }[el.dataset.state] || "";
  el.querySelector(".tip-state").textContent = label;
}

/**
 * follow subscribes to /events with the banner and the header's tip wired:
 * a drop shows "reconnecting", a resume "reconnected" (with the cursor it
 * resumed after), a restart from the tip asks the page to refresh.
 */
export function follow(params, { onRecords, onRestart }) {
  let seenDrop = false;
  return new Live(params, {
    onRecords: (recs) => {
      const last = recs[recs.length - 1];
      if (last && last.seq !== undefined) showTip({ ...(last.block || {}), seq: last.seq });
      onRecords(recs);
    },
    onTip: (tip) => showTip(tip),
    onState: (state, lastId) => {
      showTip(null, state);
      document.documentElement.dataset.live = state;
      if (state === "reconnecting" || state === "failed") {
        seenDrop = true;
        banner("The live connection dropped: reconnecting…", "warn");
      } else if (state === "resumed") {
        reconnects++;
        document.documentElement.dataset.reconnects = String(reconnects);
        banner(`Reconnected: live updates resumed after ${lastId ? "cursor " + lastId : "the last record"} (Last-Event-ID), nothing missed.`, "ok", { timeout: 8000 });
      } else if (state === "restarted") {
        reconnects++;
        document.documentElement.dataset.reconnects = String(reconnects);
        banner("Reconnected from the tip: the page was refreshed.", "ok", { timeout: 8000 });
        if (onRestart) onRestart();
      } else if (state === "live" && seenDrop) {
        banner("", "info");
      }
    },
  });
}

let reconnects = 0;

/** flash marks an element briefly (class flash-KIND), for rows and steps that changed. */
export function flash(el, kind) {
  el.classList.remove("flash-new", "flash-update", "flash-rollback");
  void el.offsetWidth; // restart the animation
  el.classList.add("flash-" + kind);
  el.dataset.flashed = kind;
}

/** copyable: an identifier in <code> with a button that copies it. */
export function copyable(text, shown) {
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
  return h("span", { class: "id" }, h("code", { title: text }, shown ?? text), btn);
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
