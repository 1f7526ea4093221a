// The status page: node tip, follower point, sync progress (a bar, and an
// ETA while behind), seqs, projection lag, subscribers, rollbacks, and a
// chart of blocks/s and records/s. It reads GET /status and GET /metrics
// (Prometheus text, parsed here) every second.

import { get, getText } from "./api.js";
import { assets, assetsEmpty, count, date, duration, learnClock, short, slotTime } from "./format.js";
import { eta, parseMetrics, rate } from "./metrics.js";
import { $, banner, chrome, fill, h, showTip, site } from "./ui.js";

const WINDOW = 120; // samples (seconds) in the chart
const samples = []; // {at, blocks, records}
let prev = null;
const readings = []; // {at, metrics} of the last twelve seconds
let failures = 0;

function figure(label, value, sub, key) {
  return h("div", { class: "figure", dataset: { figure: key } }, h("div", { class: "label" }, label), h("div", { class: "value" }, value), sub ? h("div", { class: "sub" }, sub) : null);
}

function pointText(st, p, network) {
  if (!p || p.blockNo === undefined) return ["origin", null];
  const t = slotTime(network, p.slot);
  return [`block ${count(p.blockNo)}`, `slot ${count(p.slot)}${t !== null ? " · " + date(t) : ""} · ${short(p.hash, 8, 6)}`];
}

// The totals of GET /stats, read every five seconds.
const totals = { at: 0, stats: null };

async function tick() {
  if (Date.now() - totals.at > 5000) {
    totals.at = Date.now();
    get("stats").then((st) => (totals.stats = st), () => {});
  }
  let st;
  let metrics;
  try {
    [st, metrics] = await Promise.all([get("status"), getText("metrics").then(parseMetrics).catch(() => null)]);
    if (failures) banner("The service answers again.", "ok", { timeout: 4000 });
    failures = 0;
  } catch (e) {
    failures++;
    banner(`The service does not answer (${e.message}); trying again every second.`, "bad");
    showTip(null, "failed");
    return;
  }
  const cur = metrics ? { at: Date.now(), metrics } : null;
  const blocksRate = rate(prev, cur, "marlowe_blocks_total");
  const recordsRate = rate(prev, cur, "marlowe_history_records_committed_total");
  // The time to go uses the rates over the last ten seconds or so: one
  // second's are as jittery as the page's reads (and the chart shows them).
  const since = cur && (readings.find((x) => cur.at - x.at <= 12000 && cur.at - x.at >= 1000) || prev);
  const syncRate = rate(since, cur, "marlowe_blocks_total");
  const tipRate = rate(since, cur, "marlowe_node_tip_block_number");
  if (cur) {
    prev = cur;
    readings.push(cur);
    while (readings.length && cur.at - readings[0].at > 12000) readings.shift();
  }
  if (blocksRate !== null) {
    samples.push({ at: Date.now(), blocks: blocksRate, records: recordsRate ?? 0 });
    while (samples.length > WINDOW) samples.shift();
  }

  const behind = Number(st.blocksBehind || 0);
  const progress = Math.max(0, Math.min(1, Number(st.syncProgress || 0)));
  $("progress").value = progress;
  $("progress").textContent = (progress * 100).toFixed(1) + " %";
  const secs = eta(behind, syncRate ?? 0, tipRate ?? 0);
  fill($("sync-text"),
    h("strong", {}, (progress * 100).toFixed(progress < 1 ? 2 : 0) + " %"), " synced · ",
    behind > 0 ? `${count(behind)} blocks behind the node` : "at the node’s tip",
    behind > 0 ? (secs !== null ? ` · about ${duration(secs)} to go at the current rate` : " · estimating the time to go…") : "",
    st.connected ? "" : h("span", { class: "error" }, " · not connected to the node"),
    st.nodeError ? h("span", { class: "error" }, ` · ${st.nodeError}`) : "",
    st.waitingForNode ? h("span", { class: "muted" }, " · waiting for the node to catch up with us") : "");
  $("sync-text").dataset.progress = String(progress);
  document.documentElement.dataset.syncProgress = String(progress);

  learnClock(st.network, st.slotClock);
  const [tipMain, tipSub] = pointText(st, st.nodeTip, st.network);
  const [folMain, folSub] = pointText(st, st.followerPoint, st.network);
  const m = (name) => (metrics ? metrics.get(name) : undefined);
  const subs = [
    m("marlowe_streaming_subscribers") !== undefined ? `${count(m("marlowe_streaming_subscribers"))} WebSocket subscriptions` : null,
    m("marlowe_streaming_connections") !== undefined ? `${count(m("marlowe_streaming_connections"))} connections` : null,
    m("marlowe_streaming_sse_clients") !== undefined ? `${count(m("marlowe_streaming_sse_clients"))} event streams` : null,
  ].filter(Boolean).join(" · ");
  const proj = st.projection || {};
  fill($("figures"),
    figure("Network", st.network + (st.networkMagic !== undefined ? ` (magic ${st.networkMagic})` : ""), `version ${st.version || "?"} · ${st.connected ? "connected" : "disconnected"}`, "network"),
    figure("Node tip", tipMain, tipSub, "tip"),
    figure("Follower point", folMain, [folSub, st.committedPoint && st.committedPoint.blockNo !== undefined && st.committedPoint.blockNo !== st.followerPoint?.blockNo
      ? `committed: block ${count(st.committedPoint.blockNo)}` : null].filter(Boolean).join(" · "), "follower"),
    figure("History seq", count(st.historySeq ?? 0), "the newest record committed", "seq"),
    figure("Projection", `seq ${count(proj.seq ?? 0)}`, `lag ${count(proj.lag ?? 0)} records${st.projectionError ? " · error: " + st.projectionError : ""}`, "projection"),
    figure("Subscribers", count(m("marlowe_history_live_subscribers") ?? 0), subs || "live history subscriptions", "subscribers"),
    figure("Blocks/s", blocksRate === null ? "…" : blocksRate.toFixed(1), `${count(m("marlowe_blocks_total") ?? 0)} blocks read`, "blocks"),
    figure("Records/s", recordsRate === null ? "…" : recordsRate.toFixed(1), `${count(m("marlowe_history_records_committed_total") ?? 0)} records committed`, "records"),
    figure("Value locked", totals.stats ? (assetsEmpty(totals.stats.valueLocked) ? "nothing" : assets(totals.stats.valueLocked)) : "…",
      totals.stats ? `in ${count(totals.stats.contracts.open)} open contracts · ${count(totals.stats.payoutsAvailable.count)} payouts to withdraw` : "", "locked"),
    figure("Rollbacks", count(m("marlowe_rollbacks_total") ?? 0), m("marlowe_rollback_last_depth_blocks") !== undefined ? `the last one ${count(m("marlowe_rollback_last_depth_blocks"))} block(s) deep` : "", "rollbacks"),
  );
  site.network = st.network;
  const badge = $("network");
  if (badge.hidden) {
    badge.hidden = false;
    badge.textContent = st.network;
    badge.dataset.network = st.network;
  }
  if (st.committedPoint && st.committedPoint.blockNo !== undefined) showTip({ ...st.committedPoint, seq: st.historySeq }, st.connected ? "live" : "failed");
  else showTip(null, st.connected ? "live" : "failed");
  drawChart();
}

function drawChart() {
  const svg = $("chart");
  const W = Math.max(300, Math.round(svg.getBoundingClientRect().width || 600)); // drawn in pixels: the text keeps its shape
  svg.setAttribute("viewBox", `0 0 ${W} 160`);
  const H = 160;
  const top = 10;
  const bottom = 20;
  const left = 36;
  const max = Math.max(1, ...samples.map((s) => Math.max(s.blocks, s.records)));
  const nice = niceMax(max);
  const x = (i) => left + ((W - left - 4) * i) / Math.max(1, WINDOW - 1);
  const y = (v) => top + (H - top - bottom) * (1 - v / nice);
  const ns = "http://www.w3.org/2000/svg";
  const el = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const desc = svg.querySelector("desc");
  svg.replaceChildren(desc);
  for (const f of [0, 0.5, 1]) {
    svg.append(el("line", { class: "grid", x1: left, x2: W, y1: y(nice * f), y2: y(nice * f) }));
    svg.append(el("text", { class: "axis", x: left - 4, y: y(nice * f) + 4, "text-anchor": "end" }, fmt(nice * f)));
  }
  svg.append(el("text", { class: "axis", x: left, y: H - 4 }, `${WINDOW} s ago`));
  svg.append(el("text", { class: "axis", x: W - 2, y: H - 4, "text-anchor": "end" }, "now"));
  const offset = WINDOW - samples.length;
  for (const [key, cls] of [["blocks", "s-blocks"], ["records", "s-records"]]) {
    if (samples.length < 2) continue;
    const pts = samples.map((s, i) => `${x(offset + i).toFixed(1)},${y(s[key]).toFixed(1)}`).join(" ");
    svg.append(el("polyline", { class: cls, points: pts }));
  }
  const last = samples[samples.length - 1];
  $("chart-now").textContent = last ? `now: ${last.blocks.toFixed(1)} blocks/s, ${last.records.toFixed(1)} records/s` : "";
  svg.dataset.samples = String(samples.length);
}

function niceMax(v) {
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function fmt(v) {
  if (v === 0) return "0";
  return v >= 100 ? String(Math.round(v)) : v >= 10 ? v.toFixed(0) : v.toFixed(1);
}

async function loop() {
  const started = Date.now();
  await tick();
  setTimeout(loop, Math.max(100, 1000 - (Date.now() - started)));
}

chrome("ui/status");
loop();
