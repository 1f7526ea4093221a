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

// openPage opens a page and records its console errors and uncaught errors;
// before(page), when given, runs before it loads.
async function openPage(context, url, errors, before) {
  const page = await context.newPage();
  if (before) await before(page);
  page.on("request", (r) => {
    const u = r.url();
    if (!u.startsWith("data:") && new URL(u).origin !== new URL(url).origin) errors.push({ url: page.url(), text: "a request off the port: " + u, at: Date.now() });
  });
  page.on("console", (m) => {
    if (m.type() === "error") errors.push({ url: page.url(), text: m.text(), resource: m.location().url, at: Date.now() });
  });
  page.on("pageerror", (e) => errors.push({ url: page.url(), text: "uncaught: " + e.message, at: Date.now() }));
  const res = await page.goto(url, { waitUntil: "load" });
  if (!res || res.status() !== 200) throw new Error(`${url}: ${res && res.status()}`);
  return page;
}

// watchLiveRollback keeps contract pages open on the contracts created
// last, each until its contract closes or for 30 s (so that the page sees
// its steps arrive), until one of those pages shows a step that arrived
// while it was open as rolled back: struck through, marked with the seq of
// the rolled_back record that undid it, and flashed (the page flashes a step
// only after its first drawing: "new" when the step came with the rollback
// already known, at 50 blocks/s the usual case, "rollback" when the page
// had drawn it applied). Only contracts whose creation is
// deeper than any rollback can reach are opened (their pages never 404).
// A browser opens at most six connections to one host and every contract
// page holds one for its event stream, so the pages are spread over four
// pass-through proxies on other loopback addresses, four on each. It
// returns what it saw, or null when the time is up.
async function watchLiveRollback(context, errors, ms) {
  const PER_HOST = 4;
  const DEPTH = 4; // deeper than the devnet's rollbacks (--rollback-depth 3)
  const hosts = await Promise.all(["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"].map(passThrough));
  const ctl = new AbortController();
  const res = await fetch(`${QUERY_URL}/events?all=true&from=tip`, { signal: ctl.signal });
  if (!res.ok) throw new Error(`GET /events: ${res.status}`);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  const startedAt = Date.now();
  const created = []; // [contractId, block number, slot of its creation], newest last
  const pool = new Map(); // contractId -> { page, at }
  const ended = new Set(); // contracts closed (their pages are let go)
  const rollbacks = new Set(); // seqs of rolled_back records seen
  let tipBlock = 0;
  let opened = 0;
  let buf = "";
  let pending = null;
  try {
    while (Date.now() - startedAt < ms) {
      pending = pending || reader.read();
      const next = await Promise.race([pending, sleep(300).then(() => null)]);
      if (next) {
        pending = null;
        if (next.done) return null;
        buf += next.value;
      }
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const ev = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const m = ev.match(/^data: (.*)$/m);
        if (!m || !/^event: record$/m.test(ev)) continue;
        const r = JSON.parse(m[1]);
        if (r.kind === "rolled_back") {
          rollbacks.add(r.seq);
          // Creations it undid are gone (until a fork brings them again).
          for (let j = created.length - 1; j >= 0; j--) if (created[j][2] > r.payload.to.slot) created.splice(j, 1);
        }
        if (r.block) tipBlock = r.kind === "rolled_back" ? r.block.blockNo : Math.max(tipBlock, r.block.blockNo);
        if (r.kind === "contract_created") created.push([r.contractId, r.block.blockNo, r.block.slot]);
        if (r.kind === "inputs_applied" && r.payload.closed) ended.add(r.contractId);
      }
      for (const [contractId, { page, at }] of pool) {
        const hits = await page.evaluate(() => window.__rollbackFlashes || []).catch(() => []);
        const hit = hits.find((x) => rollbacks.has(x.rollback) && x.struck);
        if (hit) return { contractId, ...hit, pages: opened, rollbacks: rollbacks.size };
        if (ended.has(contractId) || Date.now() - at > 30000) {
          pool.delete(contractId);
          await page.close();
        }
      }
      const host = hosts.find((h) => [...pool.values()].filter((x) => x.host === h).length < PER_HOST);
      if (!host) continue;
      // The newest contract whose creation no rollback can reach.
      let k = created.length - 1;
      while (k >= 0 && created[k][1] > tipBlock - DEPTH) k--;
      if (k < 0) continue;
      const [candidate] = created.splice(k, 1)[0];
      created.splice(0, k); // older ones are not waited for
      // The timeline is drawn again on every refresh, so the page records
      // each step it flashes as rolled back when it is drawn.
      const page = await openPage(context, `${host.url}/ui/contract?id=${enc(candidate)}`, errors, (p) => p.addInitScript(() => {
        window.__rollbackFlashes = [];
        new MutationObserver((muts) => {
          for (const m of muts) {
            for (const n of m.addedNodes) {
              if (n.nodeType !== 1 || n.tagName !== "LI" || !n.dataset.flashed || !n.classList.contains("rolled-back")) continue;
              const title = n.querySelector(".step-title");
              window.__rollbackFlashes.push({ flashed: n.dataset.flashed, step: Number(n.dataset.seq), rollback: Number(n.dataset.rolledBack), struck: !!title && getComputedStyle(title).textDecorationLine.includes("line-through") });
            }
          }
        }).observe(document, { childList: true, subtree: true });
      }));
      opened++;
      pool.set(candidate, { page, at: Date.now(), host });
    }
    return null;
  } finally {
    ctl.abort();
    for (const { page } of pool.values()) await page.close().catch(() => {});
    for (const h of hosts) h.close();
  }
}

// passThrough listens on a loopback address and passes every connection
// through to the query port.
function passThrough(address) {
  const target = new URL(QUERY_URL);
  const socks = new Set();
  const srv = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    socks.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
      socks.delete(client);
      socks.delete(upstream);
    };
    for (const s of [client, upstream]) {
      s.on("error", end);
      s.on("close", end);
    }
  });
  return new Promise((resolve, reject) => {
    srv.once("error", reject);
    srv.listen(0, address, () => resolve({
      url: `http://${address}:${srv.address().port}`,
      close() {
        for (const s of socks) s.destroy();
        srv.close();
      },
    }));
  });
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

// addressesIn collects the bech32 addresses of parties in a contract's
// core JSON.
function addressesIn(v, out = new Set()) {
  if (v && typeof v === "object") {
    if (typeof v.address === "string" && /^addr(_test)?1/.test(v.address)) out.add(v.address);
    for (const x of Object.values(v)) addressesIn(x, out);
  }
  return out;
}

// rolesIn collects the role names of parties in a contract's core JSON.
function rolesIn(v, out = new Set()) {
  if (v && typeof v === "object") {
    if (typeof v.role_token === "string" && v.role_token !== "" && /^[\x20-\x7e]+$/.test(v.role_token)) out.add(v.role_token);
    for (const x of Object.values(v)) rolesIn(x, out);
  }
  return out;
}

// searchFilters types text into the search box and checks that the list
// then shows the contracts of filter key=value: the URL and the list's
// query say so, and every row shown is one the API lists for that filter
// (or one a rollback removed meanwhile).
async function searchFilters(list, text, key, value) {
  await list.fill("#q", text);
  await list.press("#q", "Enter");
  await list.waitForFunction(([k, v]) => new URLSearchParams(location.search).get(k) === v &&
    new URLSearchParams(document.getElementById("contracts").dataset.query || "").get(k) === v &&
    document.querySelectorAll("#contracts tbody tr[data-id]").length > 0, [key, value], { timeout: 10000 });
  const shown = await list.$$eval("#contracts tbody tr[data-id]:not(.gone)", (rows) => rows.map((r) => r.dataset.id));
  const want = new Set((await api(`/contracts?order=desc&limit=100&${key}=${encodeURIComponent(value)}`)).results.map((c) => c.contractId));
  const wrong = [];
  for (const id of shown) {
    if (want.has(id)) continue;
    const res = await fetch(`${QUERY_URL}/contracts/${enc(id)}`);
    if (res.status !== 404) wrong.push(id); // 404: rolled back since the page read it
  }
  check(shown.length > 0 && wrong.length === 0, `searching "${text.length > 24 ? text.slice(0, 20) + "…" : text}" shows the ${shown.length} newest contracts with ${key} ${value.length > 24 ? value.slice(0, 20) + "…" : value}`, wrong);
  await list.click("#reset");
  await list.waitForFunction((k) => !new URLSearchParams(document.getElementById("contracts").dataset.query || "").has(k) &&
    document.querySelectorAll("#contracts tbody tr[data-id]").length > 0, key, { timeout: 10000 });
}

// searchOpens types text into the search box and waits for the contract
// page it opens (with #tx-TX when hash is given); then goes back. A
// transaction id is looked up as a step's, a creation's (TX#0, #1, #2) and a
// withdrawal's in turn: the lookups that find nothing answer 404.
const searches = []; // {from, to}: when searchOpens searched (its lookups' 404s are expected)
async function searchOpens(list, text, contractId, hash, what, then) {
  const span = { from: Date.now(), to: Infinity };
  searches.push(span);
  await list.fill("#q", text);
  await Promise.all([list.waitForURL((u) => u.pathname.endsWith("/ui/contract") && u.searchParams.get("id") === contractId && u.hash === hash, { timeout: 15000 }),
    list.press("#q", "Enter")]);
  await list.waitForSelector("#timeline li[data-seq]", { timeout: 10000 });
  span.to = Date.now();
  if (hash) {
    const kind = await list.waitForSelector(`#timeline li${hash}`, { timeout: 10000 }).then((el) => el.getAttribute("data-kind"));
    check(true, `searching ${what} ${text.slice(0, 12)}… opened contract ${contractId} at that ${kind} record`);
  } else {
    check((await list.textContent("#facts")).includes(contractId), `searching ${what} ${text.slice(0, 12)}… opened contract ${contractId}`);
  }
  if (then) await then(list);
  await list.goBack();
  await list.waitForSelector("#contracts tbody tr[data-id]", { timeout: 10000 });
}

// checkContractPanels checks a contract page's header, state, deadlines
// and "what can be done next" against the API (read again when the
// contract stepped meanwhile).
async function checkContractPanels(page, id) {
  const facts = await page.textContent("#facts");
  check(["Contract id", "Script version", "Roles currency", "Tags", "Metadata", "Created", "Assets locked"].every((x) => facts.includes(x)) && facts.includes(id),
    "the contract's header: id, script version, roles currency, tags, metadata, creation block and transaction, assets locked");
  const rel = await page.$$eval("#tree .deadline", (l) => l.map((d) => [d.querySelector("time") && d.querySelector("time").getAttribute("datetime"), (d.querySelector(".rel") || {}).textContent]));
  check(rel.length > 0 && rel.every(([iso, r]) => /^\d{4}-\d\d-\d\dT/.test(iso || "") && /^\((in .+|.+ ago|now)\)$/.test(r || "")), `the tree's deadlines are dates with how far away (${rel[0] && rel[0][1]})`, rel.slice(0, 3));
  for (let attempt = 0; ; attempt++) {
    const steps = await page.evaluate(() => document.documentElement.dataset.steps);
    await page.waitForFunction(() => {
      const n = document.getElementById("next");
      return n.querySelector("[data-next], p.muted, p.error") !== null;
    }, null, { timeout: 10000 });
    const c = await api(`/contracts/${enc(id)}`);
    const shown = await page.$$eval("#next [data-next]", (l) => l.map((x) => x.dataset.next).sort());
    const error = await page.$$eval("#next .error", (l) => l.map((x) => x.textContent));
    check(error.length === 0, "what can be done next: the API answered", error);
    let want;
    if (c.status === "closed") {
      want = [];
    } else {
      // The interval the page asked for ("For a transaction valid from … to …").
      const [from, to] = await page.$$eval("#next p.small time", (l) => l.slice(0, 2).map((t) => t.getAttribute("datetime")));
      const res = await fetch(`${QUERY_URL}/contracts/${enc(id)}/next?validityStart=${encodeURIComponent(from)}&validityEnd=${encodeURIComponent(to)}`);
      if (res.status === 404 && attempt < 3) {
        await sleep(1000); // it closed since it was read: the page follows
        continue;
      }
      if (!res.ok) throw new Error(`GET /contracts/${id}/next: ${res.status}`);
      const next = await res.json();
      const ai = next.applicable_inputs || {};
      want = [...(ai.deposits || []).map(() => "deposit"), ...(ai.choices || []).map(() => "choice"), ...(ai.notify ? ["notify"] : []), ...(next.can_reduce ? ["reduce"] : [])].sort();
    }
    const stepsNow = await page.evaluate(() => document.documentElement.dataset.steps);
    if (JSON.stringify(shown) === JSON.stringify(want) || attempt === 3 || steps === stepsNow) {
      check(JSON.stringify(shown) === JSON.stringify(want), `what can be done next: ${shown.join(", ") || "nothing"}, as GET /next says (${c.status})`, { shown, want });
      break;
    }
    await sleep(1000); // the contract stepped meanwhile: look again
  }
  for (let attempt = 0; ; attempt++) {
    const steps = await page.evaluate(() => Number(document.documentElement.dataset.steps));
    const state = await page.$$eval("#state h3", (l) => l.map((x) => x.textContent));
    const accounts = await page.$$eval("#state h3:first-of-type + table tbody tr", (l) => l.length);
    const c = await api(`/contracts/${enc(id)}`);
    if (c.steps !== steps && attempt < 3) {
      await sleep(1000); // the page has not shown the newest step yet
      continue;
    }
    if (c.state) {
      check(state.join("|") === "Accounts|Choices made|Bound values" && accounts === c.state.accounts.length, `the state: ${accounts} account(s), choices, bound values`, { state, accounts, want: c.state.accounts.length });
    } else {
      check((await page.textContent("#state")).includes("closed"), "the state of a closed contract: none left");
    }
    break;
  }
}

// colours reads the page's background and text colours (and muted text and
// links) in the scheme the browser is told to prefer.
async function colours(page, scheme) {
  await page.emulateMedia({ colorScheme: scheme });
  return page.evaluate(() => {
    const rgb = (s) => (s.match(/[\d.]+/g) || []).slice(0, 3).map(Number);
    const cs = (el) => getComputedStyle(el);
    const html = document.documentElement;
    const muted = document.querySelector(".muted");
    const link = document.querySelector("main a");
    return { bg: rgb(cs(html).backgroundColor), fg: rgb(cs(html).color), muted: muted ? rgb(cs(muted).color) : null, link: link ? rgb(cs(link).color) : null };
  });
}

// contrast is the WCAG contrast ratio of two sRGB colours.
function contrast(a, b) {
  const lum = ([r, g, b]) => {
    const f = (c) => ((c /= 255) <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4);
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
  return (x + 0.05) / (y + 0.05);
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

    // The search box with a transaction id: the creation's, a step's, a
    // withdrawal's (of contracts past rollback depth); with a roles
    // currency and with a party's bech32 address.
    await searchOpens(list, target.contractId.split("#")[0], target.contractId, "", "the creation's transaction");
    let stepTx = null;
    let currency = null;
    let address = null;
    let role = null;
    let tag = null;
    for (const c of older.slice(5).reverse()) {
      if (!tag) tag = Object.keys(c.tags || {})[0] || null;
      if (!role && c.roleTokenMintingPolicyId) {
        const name = [...rolesIn((await api(`/contracts/${enc(c.contractId)}`)).initialContract)][0];
        if (name) role = `${c.roleTokenMintingPolicyId}.${name}`;
      }
      if (!currency && c.roleTokenMintingPolicyId) currency = c.roleTokenMintingPolicyId;
      if (!address) address = [...addressesIn((await api(`/contracts/${enc(c.contractId)}`)).initialContract)][0] || null;
      if (!stepTx && c.steps > 0) {
        const h = await api(`/contracts/${enc(c.contractId)}/history?limit=100`);
        const r = h.results.find((x) => x.kind === "inputs_applied");
        if (r) stepTx = { contractId: c.contractId, txId: r.txId };
      }
    }
    for (let i = 0, cursor = ""; (!address || !currency) && i < 10; i++) {
      // Older contracts, a page at a time, until one has an address party and one roles.
      const pg = await api(`/contracts?order=desc&limit=50${cursor ? "&cursor=" + enc(cursor) : ""}`);
      cursor = pg.cursor || "";
      for (const c of pg.results) {
        if (!currency && c.roleTokenMintingPolicyId) currency = c.roleTokenMintingPolicyId;
        if (!address) address = [...addressesIn((await api(`/contracts/${enc(c.contractId)}`)).initialContract)][0] || null;
      }
      if (!address || !currency) await sleep(1000);
    }
    check(stepTx, "a contract past rollback depth has a step");
    await searchOpens(list, stepTx.txId, stepTx.contractId, "#tx-" + stepTx.txId, "a step's transaction");
    let wd = null;
    for (let i = 0; !wd && i < 30; i++) {
      const ws = (await api("/withdrawals?limit=10")).results;
      wd = ws.find((w) => w.payouts && w.payouts.length) || null;
      if (!wd) await sleep(1000);
    }
    check(wd, "the devnet withdrew a payout");
    await searchOpens(list, wd.withdrawalId, wd.payouts[0].contractId, "#tx-" + wd.withdrawalId, "a withdrawal's transaction", async (page) => {
      // Its payouts: each withdrawn one with its withdrawal.
      const mine = wd.payouts.filter((p) => p.contractId === wd.payouts[0].contractId).map((p) => p.payoutId);
      const rows = await page.$$eval("#payouts tr[data-payout]", (l) => l.map((tr) => ({ id: tr.dataset.payout, status: tr.dataset.status, text: tr.textContent })));
      const shown = rows.filter((r) => mine.includes(r.id));
      check(shown.length === mine.length && shown.every((r) => r.status === "withdrawn" && r.text.includes(wd.withdrawalId.slice(0, 10))),
        `the contract's payouts show the ${mine.length} it withdrew, with the withdrawal ${wd.withdrawalId.slice(0, 10)}…`, { mine, rows });
    });
    check(currency && address, `the devnet's contracts have roles (${currency}) and address parties (${address})`);
    await searchFilters(list, currency, "roleCurrency", currency);
    await searchFilters(list, address, "partyAddress", address);
    check(role && tag, `the devnet's contracts have a named role (${role}) and a tag (${tag})`);
    await searchFilters(list, role, "partyRole", role);
    await searchFilters(list, tag, "tag", tag);

    // Paging: 10 a page, the next page older than the first, and back.
    await list.selectOption('select[name="limit"]', "10");
    await list.waitForFunction(() => location.search.includes("limit=10") && document.querySelectorAll("#contracts tbody tr[data-id]:not(.gone)").length === 10, null, { timeout: 10000 });
    // The rows shown when "Older" is clicked (read and clicked in one go:
    // new contracts move the first page meanwhile).
    const page1 = await list.evaluate(() => {
      const seqs = [...document.querySelectorAll("#contracts tbody tr[data-id]:not(.gone)")].map((r) => Number(r.dataset.seq));
      document.getElementById("next").click();
      return seqs;
    });
    await list.waitForFunction(() => /page 2/.test(document.getElementById("page-no").textContent) && new URLSearchParams(document.getElementById("contracts").dataset.query || "").get("cursor") &&
      document.querySelectorAll("#contracts tbody tr[data-id]").length > 0, null, { timeout: 10000 });
    const page2 = await list.$$eval("#contracts tbody tr[data-id]:not(.gone)", (rows) => rows.map((r) => Number(r.dataset.seq)));
    check(page2.length > 0 && Math.max(...page2) < Math.min(...page1) && new URL(list.url()).searchParams.has("cursor"),
      `"Older" shows the next ${page2.length} contracts, all older than the first page's`, { page1, page2 });
    await list.click("#prev");
    await list.waitForFunction(() => /page 1/.test(document.getElementById("page-no").textContent) && !new URLSearchParams(document.getElementById("contracts").dataset.query || "").get("cursor"), null, { timeout: 10000 });
    const back = await list.$$eval("#contracts tbody tr[data-id]:not(.gone)", (rows) => rows.map((r) => Number(r.dataset.seq)));
    check(back.length === 10 && Math.min(...back) >= Math.min(...page1) && (await list.$eval("#prev", (b) => b.disabled)), `"Newer" goes back to the first page`, { page1, back });
    await list.selectOption('select[name="limit"]', "25");
    await list.waitForFunction(() => !location.search.includes("limit=") && document.querySelectorAll("#contracts tbody tr[data-id]").length > 10, null, { timeout: 10000 });

    // The keyboard: the first Tab reaches the skip link (with a visible
    // focus ring), Enter follows it; searches typed and sent with Enter
    // were checked above.
    // (A page of its own: the list keeps watching for rollbacks below.)
    const kb = await openPage(context, BASE + "/", errors);
    await kb.waitForSelector("#contracts tbody tr[data-id]", { timeout: 10000 });
    await kb.keyboard.press("Tab");
    const skip = await kb.evaluate(() => ({ cls: document.activeElement.className, outline: getComputedStyle(document.activeElement).outlineStyle }));
    await kb.keyboard.press("Enter");
    check(skip.cls === "skip" && skip.outline !== "none" && (await kb.evaluate(() => location.hash)) === "#main", "the first Tab reaches the skip link, focus shown, Enter goes to the content", skip);
    await kb.close();

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
      // A rollback may take the contract away between that read and the
      // page's own (the page then says it is missing): another contract.
      const shown = await page.waitForSelector("#timeline li[data-seq]", { timeout: 10000 }).then(() => true, () => false);
      if (!shown) {
        const missing = await page.$eval("#load-error", (el) => !el.hidden).catch(() => false);
        await page.close();
        if (!missing) throw new Error(`contract ${created.contractId}: its page showed neither its timeline nor that it is missing`);
        continue;
      }
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
    const details = await live.page.$$eval("#timeline li[data-kind=inputs_applied]", (l) => l.map((li) => ({
      block: /^block \d/.test((li.querySelector(".step-head .block") || {}).textContent || ""),
      valid: /^Valid (from|with)/.test([...li.querySelectorAll(".step-body p")].map((p) => p.textContent).find((t) => t.startsWith("Valid")) || ""),
      slots: /\(slots [\d–]+ to [\d–]+\)/.test(li.textContent),
    })));
    check(details.length > 0 && details.every((d) => d.block && d.valid && d.slots), "every step shows its block and validity interval (dates and slots)", details);
    const paying = await live.page.$$eval("#timeline li[data-kind=inputs_applied]", (l) => l.map((li) => [Number(li.dataset.seq), /Paid out:/.test(li.textContent)]));
    const hist = (await api(`/contracts/${enc(live.id)}/history?includeRolledBack=true&limit=1000`)).results;
    const wantPaying = new Map(hist.filter((r) => r.kind === "inputs_applied").map((r) => [r.seq, (r.payload.payouts || []).length > 0]));
    check(paying.every(([seq, p]) => wantPaying.get(seq) === p), `every step with payouts shows them (${paying.filter(([, p]) => p).length} of ${paying.length})`, { paying, want: [...wantPaying] });
    // The tree closes and opens with the keyboard (a branch is a
    // <details>; tried again should a new step redraw the tree meanwhile).
    let toggled = null;
    for (let i = 0; i < 3 && !toggled; i++) {
      const branches = await live.page.$$("#tree details > summary");
      check(branches.length > 0, "the tree has branches");
      const branch = branches[branches.length - 1];
      const was = await branch.evaluate((el) => el.parentElement.open).catch(() => null);
      // (A new step may redraw the tree between the look-up and the focus.)
      if (was === null || !(await branch.focus().then(() => true, () => false))) continue;
      await live.page.keyboard.press("Enter");
      // (A branch's nodes are drawn on its toggle event, a task after the key.)
      const first = await live.page.waitForFunction(([el, open]) => el.parentElement.open === open && (!open || el.parentElement.querySelectorAll(":scope > ul > li").length > 0), [branch, !was], { timeout: 3000 }).then(() => true, () => false);
      await live.page.keyboard.press("Enter");
      const second = await live.page.waitForFunction(([el, open]) => el.parentElement.open === open && (!open || el.parentElement.querySelectorAll(":scope > ul > li").length > 0), [branch, was], { timeout: 3000 }).then(() => true, () => false);
      if (await branch.evaluate((el) => el.isConnected)) toggled = { was, first, second };
    }
    check(toggled && toggled.first && toggled.second, "Enter on a branch of the tree closes and opens it (its nodes drawn when open)", toggled);

    // Light and dark schemes: readable text in both (WCAG contrast).
    for (const scheme of ["light", "dark"]) {
      const c = await colours(live.page, scheme);
      const dark = contrast(c.bg, [0, 0, 0]) < contrast(c.bg, [255, 255, 255]);
      const ratios = { text: contrast(c.fg, c.bg), muted: c.muted ? contrast(c.muted, c.bg) : 0, link: c.link ? contrast(c.link, c.bg) : 0 };
      check(dark === (scheme === "dark") && ratios.text >= 7 && ratios.muted >= 4.5 && ratios.link >= 4.5,
        `the ${scheme} scheme: ${dark ? "dark" : "light"} background, contrast ${ratios.text.toFixed(1)} (text), ${ratios.muted.toFixed(1)} (muted), ${ratios.link.toFixed(1)} (links)`, c);
      if (scheme === "dark") await shot(live.page, "contract-dark.png");
    }
    await live.page.emulateMedia({ colorScheme: "light" });

    // The header, the state, the deadlines as dates with how far away, and
    // what can be done next (GET /next for now), as the API has them.
    await checkContractPanels(live.page, live.id);
    // ... and of an open one (the live one may have closed by now).
    const opens = (await api("/contracts?status=open&order=desc&limit=30")).results;
    check(opens.length > 0, "the devnet has open contracts");
    const openId = opens[opens.length - 1].contractId;
    const openPage1 = await openPage(context, `${BASE}/ui/contract?id=${enc(openId)}`, errors);
    await openPage1.waitForSelector("#timeline li[data-seq]", { timeout: 10000 });
    await checkContractPanels(openPage1, openId);
    await openPage1.close();

    // Merkleized cases are marked (every branch expanded).
    let merkle = null;
    for (const c of (await api("/contracts?order=desc&limit=100")).results.slice(10)) {
      const full = await api(`/contracts/${enc(c.contractId)}`);
      const n = (JSON.stringify(full.initialContract).match(/"merkleized_then"/g) || []).length;
      if (n > 0) {
        merkle = { id: c.contractId, n };
        break;
      }
    }
    check(merkle, "the devnet has a contract with merkleized cases");
    const mPage = await openPage(context, `${BASE}/ui/contract?id=${enc(merkle.id)}`, errors);
    await mPage.waitForSelector("#tree li[data-kind]", { timeout: 10000 });
    await mPage.click("#expand");
    await mPage.waitForFunction((n) => document.querySelectorAll("#tree .badge.merkle").length >= n && document.querySelectorAll("#tree details:not([open])").length === 0, merkle.n, { timeout: 10000 });
    const marks = await mPage.$$eval("#tree .badge.merkle", (l) => l.map((b) => b.textContent));
    const hidden = await mPage.$$eval("#tree li[data-kind=hidden]", (l) => l.map((x) => x.textContent));
    check(marks.length >= merkle.n && hidden.every((t) => /not revealed/.test(t)) && marks.filter((m) => m === "merkleized").length === hidden.length,
      `contract ${merkle.id}: its ${merkle.n} merkleized case(s) are marked (${marks.filter((m) => /revealed/.test(m)).length} revealed, ${hidden.length} not)`, { marks, hidden });
    await mPage.close();
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
    // (Closed: a browser opens at most six connections to one host, and
    // every contract page holds one for its event stream.)
    await rbPage.close();
    await live.page.close();

    // A rollback seen live on an open contract page: a step the page
    // showed is struck through and flashed when a rollback undoes it,
    // without a reload.
    const seen = await watchLiveRollback(context, errors, 180000); // 14-85 s seen
    check(seen, "an open contract page strikes through a step when a rollback undoes it, without reload", seen);
    log(`     ${seen.contractId}: the step at seq ${seen.step}, undone by the rollback at seq ${seen.rollback}, flashed "${seen.flashed}" (${seen.pages} pages opened, ${seen.rollbacks} rollbacks watched)`);

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
    check(Number(figures.blocks) > 0 && /^block \d/.test(figures.tip) && /^block \d/.test(figures.follower) && /^\d/.test(figures.seq) && /^seq /.test(figures.projection) &&
      /^\d/.test(figures.subscribers) && /^\d/.test(figures.records), "node tip, follower point, history seq, projection seq, subscribers and rates are shown", figures);
    const lag = await status.$eval('[data-figure="projection"] .sub', (x) => x.textContent);
    check(/^lag [\d,]+ records/.test(lag), `the projection's lag: ${lag}`);
    check(await status.$$eval("#chart polyline", (l) => l.length === 2), "the chart draws blocks/s and records/s");
    await shot(status, "status.png");

    // While behind: the status page of a follower catching up, its /status
    // and /metrics answered as the service's own with the node 60,000
    // blocks ahead and closing at 190 blocks/s (200 read, the tip growing
    // 10): the bar shows the share synced and the time to go.
    const behindSince = Date.now();
    const catchingUp = () => {
      const t = (Date.now() - behindSince) / 1000;
      const tip = 100000 + Math.round(10 * t);
      const behind = Math.max(1, Math.round(60000 - 190 * t));
      return { t, tip, behind };
    };
    const behindPage = await openPage(context, BASE + "/ui/status", errors, async (page) => {
      await page.route((u) => u.pathname === "/status", async (route) => {
        const res = await route.fetch();
        const st = await res.json();
        const { tip, behind } = catchingUp();
        st.nodeTip = { ...st.nodeTip, blockNo: tip };
        st.followerPoint = { ...st.followerPoint, blockNo: tip - behind };
        st.blocksBehind = behind;
        st.syncProgress = (tip - behind) / tip;
        await route.fulfill({ response: res, json: st });
      });
      await page.route((u) => u.pathname === "/metrics", async (route) => {
        const res = await route.fetch();
        const { t } = catchingUp();
        const text = (await res.text()).split("\n").filter((l) => !/^marlowe_(blocks_total|node_tip_block_number)[ {]/.test(l)).join("\n") +
          `\nmarlowe_blocks_total ${Math.round(40000 + 200 * t)}\nmarlowe_node_tip_block_number ${100000 + Math.round(10 * t)}\n`;
        await route.fulfill({ response: res, body: text });
      });
    });
    await behindPage.waitForFunction(() => /to go at the current rate/.test(document.getElementById("sync-text").textContent), null, { timeout: 15000 });
    const behindText = (await behindPage.textContent("#sync-text")).trim();
    const behindBar = await behindPage.$eval("#progress", (p) => p.value);
    const m = /([\d,]+) blocks behind the node · about (?:(\d+) min )?(\d+) s to go/.exec(behindText);
    const etaSecs = m ? Number(m[2] || 0) * 60 + Number(m[3]) : NaN;
    const wantEta = Number((m ? m[1] : "0").replace(/,/g, "")) / 190;
    check(behindBar > 0.35 && behindBar < 0.45 && m && Math.abs(etaSecs - wantEta) < wantEta * 0.25,
      `while behind, the status page shows the bar at ${(behindBar * 100).toFixed(1)} % and "${behindText}" (${Math.round(wantEta)} s expected)`);
    await shot(behindPage, "status-behind.png");
    await behindPage.close();

    // No console errors, except the cut connections' own (the moment they
    // were cut), the 404s of the search box's lookups of a transaction id
    // (a step's, a creation's, a withdrawal's, in turn), and a 404 of /next
    // for a contract that closed between the page's read of it and its
    // /next (the page then reads it again; the browser logs every 404).
    const cutErrors = (e) => e.at >= cutAt && e.at < cutAt + 5000 && /net::ERR_|Failed to load resource/.test(e.text);
    const closedRace = [];
    for (const e of errors) {
      const m = /\/contracts\/([^/?]+)\/next\?/.exec(e.resource || "");
      if (m && /status of 404/.test(e.text) && (await api(`/contracts/${m[1]}`)).status === "closed") closedRace.push(e);
    }
    const lookups = (e) => /status of 404/.test(e.text) && /\/(transactions\/[0-9a-f]{64}|withdrawals\/[0-9a-f]{64}|contracts\/[0-9a-f]{64}%23\d)$/.test(e.resource || "") &&
      searches.some((w) => e.at >= w.from && e.at <= w.to);
    const real = errors.filter((e) => !cutErrors(e) && !closedRace.includes(e) && !lookups(e));
    check(real.length === 0, `no console errors and no request off the query port on the explorer's pages (${errors.filter(cutErrors).length} from the cut connections, ${closedRace.length} /next of a contract closing meanwhile, ${errors.filter(lookups).length} 404s of the search's transaction lookups)`, real);
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
