// End-to-end test of the contract explorer (the pages at / on the query
// port) in headless Chromium, against `run --devnet` with a fast block rate
// and the devnet's rollbacks. run.sh starts the service and runs this after
// test.cjs; it prints one line per check and exits non-zero on the first
// failure.
//
//   QUERY_URL               the service's query port
//   CHROMIUM, USER_DATA_DIR the browser and a fresh profile directory
//   PLAYWRIGHT_CORE         the installed playwright-core package
//   ARTIFACTS               where the screenshots go (one per page)
//   DOC_SCREENSHOT          optional: also write the contract page's
//                           screenshot there (docs/explorer-contract.png)
//
// The pages are opened through a small TCP proxy in front of the query
// port, so that the test can cut the pages' event streams and check that
// they resume (Last-Event-ID) with a banner saying so.

"use strict";

const fs = require("node:fs");
const net = require("node:net");
const path = require("node:path");
const { chromium } = require(process.env.PLAYWRIGHT_CORE || "playwright-core");

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(name + " is not set (run scripts/browser/run.sh)");
  return v;
};
const QUERY_URL = env("QUERY_URL");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const USER_DATA_DIR = env("USER_DATA_DIR");
const ARTIFACTS = env("ARTIFACTS");
const DOC_SCREENSHOT = process.env.DOC_SCREENSHOT || "";

const started = Date.now();
const log = (msg) => console.log(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}`);
function check(ok, what, detail) {
  if (!ok) throw new Error(what + (detail === undefined ? "" : ": " + JSON.stringify(detail)));
  log("ok   " + what);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function api(p) {
  const res = await fetch(QUERY_URL + p);
  if (!res.ok) throw new Error(`GET ${p}: ${res.status}`);
  return res.json();
}
const enc = (id) => encodeURIComponent(id);

// records reads GET /events from the tip and calls onRecord for each
// record until it returns true or the time is up; it returns that record.
async function waitForRecord(params, pred, ms) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), ms);
  try {
    const res = await fetch(`${QUERY_URL}/events?${params}`, { signal: ctl.signal });
    if (!res.ok) throw new Error(`GET /events?${params}: ${res.status} ${await res.text()}`);
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return null;
      buf += value;
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const ev = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const m = ev.match(/^data: (.*)$/m);
        if (m && /^event: record$/m.test(ev)) {
          const rec = JSON.parse(m[1]);
          if (pred(rec)) return rec;
        }
      }
    }
  } catch (e) {
    if (e.name === "AbortError") return null;
    throw e;
  } finally {
    clearTimeout(timer);
    ctl.abort();
  }
}

// A TCP proxy to the query port; cutEvents() drops the connections whose
// last request was GET /events.
function startProxy() {
  const target = new URL(QUERY_URL);
  const conns = new Set();
  const srv = net.createServer((client) => {
    const c = { client, upstream: net.connect(Number(target.port), target.hostname), events: false };
    conns.add(c);
    client.on("data", (d) => {
      const s = d.toString("latin1", 0, Math.min(d.length, 64));
      if (/^(GET|HEAD|POST|OPTIONS) /.test(s)) c.events = /^GET \/events[?\s]/.test(s);
      c.upstream.write(d);
    });
    c.upstream.on("data", (d) => client.write(d));
    const end = () => {
      conns.delete(c);
      client.destroy();
      c.upstream.destroy();
    };
    client.on("close", end);
    c.upstream.on("close", end);
    client.on("error", end);
    c.upstream.on("error", end);
  });
  return new Promise((resolve) => srv.listen(0, "127.0.0.1", () => resolve({
    url: `http://127.0.0.1:${srv.address().port}`,
    cutEvents() {
      let n = 0;
      for (const c of conns) {
        if (c.events) {
          c.client.destroy();
          c.upstream.destroy();
          n++;
        }
      }
      return n;
    },
    close() {
      for (const c of conns) {
        c.client.destroy();
        c.upstream.destroy();
      }
      srv.close();
    },
  })));
}

// openPage opens a page and records its console errors and uncaught errors.
async function openPage(context, url, errors) {
  const page = await context.newPage();
  page.on("console", (m) => {
    if (m.type() === "error") errors.push({ url: page.url(), text: m.text(), resource: m.location().url, at: Date.now() });
  });
  page.on("pageerror", (e) => errors.push({ url: page.url(), text: "uncaught: " + e.message, at: Date.now() }));
  const res = await page.goto(url, { waitUntil: "load" });
  if (!res || res.status() !== 200) throw new Error(`${url}: ${res && res.status()}`);
  return page;
}

async function shot(page, name) {
  const file = path.join(ARTIFACTS, name);
  await page.screenshot({ path: file, fullPage: true });
  log(`     screenshot ${file}`);
  return file;
}

// docScreenshot writes the README's picture of a contract page: the top of
// the page (header, state, next, tree) at a readable size.
async function docScreenshot(page) {
  await page.setViewportSize({ width: 1280, height: 1500 });
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: DOC_SCREENSHOT, fullPage: false });
  log(`     documentation screenshot ${DOC_SCREENSHOT}`);
  await page.setViewportSize({ width: 1280, height: 900 });
  return true;
}

// findRolledBack looks for a contract whose history has a rolled-back
// step, newest contracts first; prefers an open one.
async function findRolledBack() {
  const list = await api("/contracts?order=desc&limit=200");
  let any = null;
  for (const c of list.results) {
    if (c.steps === 0 && c.status === "open") continue;
    const h = await api(`/contracts/${enc(c.contractId)}/history?includeRolledBack=true&limit=1000`);
    if (h.results.some((r) => r.kind === "inputs_applied" && r.rolledBackBy !== undefined)) {
      if (c.status === "open") return c.contractId;
      any = any || c.contractId;
    }
  }
  return any;
}

async function main() {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  const proxy = await startProxy();
  const BASE = proxy.url;
  const errors = [];
  const context = await chromium.launchPersistentContext(USER_DATA_DIR, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  try {
    // The contracts page lists contracts within seconds, and a new one appears without reload.
    const t0 = Date.now();
    const list = await openPage(context, BASE + "/", errors);
    await list.waitForSelector("#contracts tbody tr[data-id]", { timeout: 15000 });
    const first = await list.$$eval("#contracts tbody tr[data-id]", (rows) => rows.map((r) => r.dataset.id));
    check(first.length > 0, `the contracts page lists ${first.length} contracts ${((Date.now() - t0) / 1000).toFixed(1)} s after it was opened`);
    await list.waitForFunction((seen) => [...document.querySelectorAll("#contracts tbody tr[data-id]")].some((r) => !seen.includes(r.dataset.id)), first, { timeout: 20000 });
    const fresh = await list.$$eval("#contracts tbody tr[data-id]", (rows, seen) => rows.filter((r) => !seen.includes(r.dataset.id)).map((r) => r.dataset.id), first);
    const loads = await list.evaluate(() => performance.getEntriesByType("navigation").length);
    check(fresh.length > 0 && loads === 1, `a new contract appeared without reload (${fresh[0]})`);
    const order = await list.$$eval("#contracts tbody tr[data-id]", (rows) => rows.map((r) => Number(r.dataset.seq)));
    check(order.every((s, i) => i === 0 || order[i - 1] >= s), "the list is newest first");

    // Filters: status=open from the form; the URL says so and every row is open.
    await list.selectOption('select[name="status"]', "open");
    await list.waitForFunction(() => location.search.includes("status=open") && (document.getElementById("contracts").dataset.query || "").includes("status=open") &&
      document.querySelectorAll("#contracts tbody tr[data-id]").length > 0, null, { timeout: 10000 });
    const statuses = await list.$$eval("#contracts tbody tr[data-id] .badge.open, #contracts tbody tr[data-id] .badge.closed", (b) => b.map((x) => x.textContent));
    check(statuses.length > 0 && statuses.every((s) => s === "open"), `the status filter shows only open contracts (${statuses.length})`);
    await list.selectOption('select[name="status"]', "");
    await list.waitForFunction(() => !(document.getElementById("contracts").dataset.query || "").includes("status="), null, { timeout: 10000 });
    await shot(list, "contracts.png");

    // The search box: a contract id opens its page.
    // Not the newest one: a rollback may still take it away.
    const older = (await api("/contracts?order=desc&limit=20")).results;
    const target = older[older.length - 1];
    await list.fill("#q", target.contractId);
    await Promise.all([list.waitForURL(/\/ui\/contract\?id=/, { timeout: 10000 }), list.press("#q", "Enter")]);
    await list.waitForSelector("#timeline li[data-seq]", { timeout: 10000 });
    check((await list.textContent("#facts")).includes(target.contractId), `the search box opened contract ${target.contractId}`);
    await list.goBack();
    await list.waitForSelector("#contracts tbody tr[data-id]", { timeout: 10000 });

    // A contract being stepped: opened just after its creation, a step
    // applied meanwhile appears (a few tries: some lifecycles end at once).
    let live = null;
    for (let attempt = 0; attempt < 4 && !live; attempt++) {
      const created = await waitForRecord("kind=contract_created&from=tip", () => true, 15000);
      if (!created) continue;
      // Opened once the API has it (the projection follows the history), as from the list.
      const known = await fetch(`${QUERY_URL}/contracts/${enc(created.contractId)}?minSeq=${created.seq}`);
      if (!known.ok) continue; // rolled back already
      const page = await openPage(context, `${BASE}/ui/contract?id=${enc(created.contractId)}`, errors);
      await page.waitForSelector("#timeline li[data-seq]", { timeout: 10000 });
      const before = await page.$$eval("#timeline li[data-kind=inputs_applied]", (l) => l.length);
      const closed = (await page.textContent("#facts")).includes("it has ended");
      if (!closed) {
        try {
          await page.waitForFunction((n) => document.querySelectorAll("#timeline li[data-kind=inputs_applied]").length > n, before, { timeout: 8000 });
          live = { page, id: created.contractId, before };
          break;
        } catch {
          /* no step in time: another contract */
        }
      }
      await page.close();
    }
    check(live, "a contract page shows a step applied while it was open");
    const after = await live.page.$$eval("#timeline li[data-kind=inputs_applied]", (l) => l.length);
    log(`     ${live.id}: ${live.before} step(s) when opened, ${after} now, without reload`);
    const flashed = await live.page.$$eval("#timeline li[data-flashed]", (l) => l.length);
    check(flashed > 0, "the new step is flashed");
    const treeNodes = await live.page.$$eval("#tree li[data-kind]", (l) => l.map((x) => x.dataset.kind));
    check(treeNodes.length > 3 && treeNodes.includes("when"), `the contract is drawn as a tree (${treeNodes.length} nodes shown)`);
    const words = await live.page.$$eval("#timeline li[data-kind=inputs_applied] .step-body", (l) => l.map((x) => x.textContent));
    check(words.every((w) => /deposits|chooses|notification|no inputs/.test(w)), "every step's inputs are in words", words.slice(0, 3));
    let docShot = false;
    if (DOC_SCREENSHOT && (await live.page.textContent("#facts")).includes("waiting for its next step")) {
      docShot = await docScreenshot(live.page); // an open contract: its current position shows
    }

    // A step a rollback removed is struck through, with the rollback.
    let rb = await findRolledBack();
    for (let i = 0; !rb && i < 3; i++) {
      await waitForRecord("all=true&from=tip", (r) => r.kind === "rolled_back", 15000);
      await sleep(300);
      rb = await findRolledBack();
    }
    check(rb, "the devnet rolled back a step");
    const rbPage = await openPage(context, `${BASE}/ui/contract?id=${enc(rb)}`, errors);
    await rbPage.waitForSelector("#timeline li.rolled-back", { timeout: 10000 });
    await rbPage.waitForFunction(() => [...document.querySelectorAll("#timeline li.rolled-back .rollback-note")].every((n) => /, to block/.test(n.textContent)), null, { timeout: 10000 });
    const struck = await rbPage.waitForFunction(() => [...document.querySelectorAll("#timeline li.rolled-back .step-title")]
      .every((el) => getComputedStyle(el).textDecorationLine.includes("line-through")), null, { timeout: 5000 }).then(() => true, () => false);
    const note = await rbPage.textContent("#timeline li.rolled-back .rollback-note");
    const styles = await rbPage.$$eval("#timeline li.rolled-back", (l) => l.map((li) => [li.dataset.kind, li.className, getComputedStyle(li.querySelector(".step-title")).textDecorationLine]));
    check(struck, `contract ${rb}: a rolled-back step is struck through: "${note.trim()}"`, styles);
    const current = await rbPage.$$eval("#tree li.current", (l) => l.length);
    const open = (await rbPage.textContent("#facts")).includes("waiting for its next step");
    check(!open || current === 1, `the current position is marked in the tree (${open ? "open" : "closed"} contract)`);
    await shot(rbPage, "contract.png");
    await shot(live.page, "contract-live.png");
    if (DOC_SCREENSHOT && !docShot) await docScreenshot(rbPage);

    // The contracts page flashed a row a rollback changed (it has been
    // watching all along).
    await list.waitForFunction(() => Number(document.getElementById("contracts").dataset.flashedRollback || 0) > 0, null, { timeout: 30000 });
    check(true, `the contracts page flashed ${await list.evaluate(() => document.getElementById("contracts").dataset.flashedRollback)} row(s) a rollback changed`);

    // A dropped event stream resumes (Last-Event-ID) and says so.
    const cutAt = Date.now();
    const cut = proxy.cutEvents();
    await list.waitForFunction(() => Number(document.documentElement.dataset.reconnects || 0) > 0 && document.documentElement.dataset.live === "resumed", null, { timeout: 15000 });
    const bannerText = await list.textContent("#banner");
    check(/Reconnected: live updates resumed after cursor \S+ \(Last-Event-ID\)/.test(bannerText), `after ${cut} event stream(s) were cut, the banner says: "${bannerText}"`);
    const before2 = await list.$$eval("#contracts tbody tr[data-id]", (rows) => rows.map((r) => r.dataset.id));
    await list.waitForFunction((seen) => [...document.querySelectorAll("#contracts tbody tr[data-id]")].some((r) => !seen.includes(r.dataset.id)), before2, { timeout: 20000 });
    check(true, "the contracts page is live again after the reconnect");

    // The status page shows progress and a chart.
    const status = await openPage(context, BASE + "/ui/status", errors);
    await status.waitForFunction(() => Number(document.getElementById("chart").dataset.samples || 0) >= 3, null, { timeout: 15000 });
    const progress = await status.$eval("#progress", (p) => p.value);
    const syncText = await status.textContent("#sync-text");
    const figures = await status.$$eval(".figure", (f) => Object.fromEntries(f.map((x) => [x.dataset.figure, x.querySelector(".value").textContent])));
    check(progress > 0.9 && /synced/.test(syncText), `the status page shows progress: ${syncText.trim()}`);
    check(Number(figures.blocks) > 0 && /^block \d/.test(figures.tip) && /^seq /.test(figures.projection), "node tip, follower point, seqs and rates are shown", figures);
    check(await status.$$eval("#chart polyline", (l) => l.length === 2), "the chart draws blocks/s and records/s");
    await shot(status, "status.png");

    // No console errors, except the cut connections' own (the moment they
    // were cut) and a 404 of /next for a contract that closed between the
    // page's read of it and its /next (the page then reads it again; the
    // browser logs every 404).
    const cutErrors = (e) => e.at >= cutAt && e.at < cutAt + 5000 && /net::ERR_|Failed to load resource/.test(e.text);
    const closedRace = [];
    for (const e of errors) {
      const m = /\/contracts\/([^/?]+)\/next\?/.exec(e.resource || "");
      if (m && /status of 404/.test(e.text) && (await api(`/contracts/${m[1]}`)).status === "closed") closedRace.push(e);
    }
    const real = errors.filter((e) => !cutErrors(e) && !closedRace.includes(e));
    check(real.length === 0, `no console errors on the explorer's pages (${errors.filter(cutErrors).length} from the cut connections, ${closedRace.length} /next of a contract closing meanwhile)`, real);
  } finally {
    await context.close();
    proxy.close();
  }
}

main().then(
  () => log("explorer test passed"),
  (e) => {
    console.error("FAIL " + e.message);
    process.exit(1);
  },
);
