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
//   DOC_SCREENSHOTS         optional: a directory (docs) to write the
//                           documentation's pictures to (explorer-*.png)
//   EXPLORER_LINKS          the service's --ui-links (KIND=TEMPLATE,...)
//
// The pages are opened through a small TCP proxy in front of the query
// port, so that the test can cut the pages' event streams and check that
// they resume (Last-Event-ID) with a banner saying so.

"use strict";

const fs = require("node:fs");
const net = require("node:net");
const path = require("node:path");
const { chromium } = require(process.env.PLAYWRIGHT_CORE || "playwright-core");
const makeItems = require("./explorer-items.cjs");

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(name + " is not set (run scripts/browser/run.sh)");
  return v;
};
const QUERY_URL = env("QUERY_URL");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const USER_DATA_DIR = env("USER_DATA_DIR");
const ARTIFACTS = env("ARTIFACTS");
const DOC_SCREENSHOTS = process.env.DOC_SCREENSHOTS || "";
// The Cardano explorer link templates the service was given (--ui-links).
const LINKS = Object.fromEntries((process.env.EXPLORER_LINKS || "").split(",").filter(Boolean).map((x) => x.split(/=(.*)/s).slice(0, 2)));

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

// eachRecord reads the record events of an /events body (reader, of its
// text) and calls onRecord for each until it returns true: it returns that
// record, or null when the body ends first.
async function eachRecord(reader, onRecord) {
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
        if (onRecord(rec)) return rec;
      }
    }
  }
}

// waitForRecord reads GET /events?params and calls pred for each
// record until it returns true or the time is up; it returns that record.
async function waitForRecord(params, pred, ms) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), ms);
  try {
    const res = await fetch(`${QUERY_URL}/events?${params}`, { signal: ctl.signal });
    if (!res.ok) throw new Error(`GET /events?${params}: ${res.status} ${await res.text()}`);
    return await eachRecord(res.body.pipeThrough(new TextDecoderStream()).getReader(), pred);
  } catch (e) {
    if (e.name === "AbortError") return null;
    throw e;
  } finally {
    clearTimeout(timer);
    ctl.abort();
  }
}

// A TCP proxy to the query port on a loopback address (an origin of its
// own: the pages opened through it share one event stream, their shared
// worker's). It knows which connections carry GET /events (their last
// request): eventStreams() counts them, cutEvents() drops them,
// freezeEvents() stops passing their bytes on, either way, leaving them
// open (a connection dead without a word), and those opened later too,
// until thawEvents() drops the frozen ones.
function startProxy(address = "127.0.0.1") {
  const target = new URL(QUERY_URL);
  const conns = new Set();
  let freezing = false;
  const srv = net.createServer((client) => {
    const c = { client, upstream: net.connect(Number(target.port), target.hostname), events: false, frozen: false };
    conns.add(c);
    client.on("data", (d) => {
      if (c.frozen) return;
      const s = d.toString("latin1", 0, Math.min(d.length, 64));
      if (/^(GET|HEAD|POST|OPTIONS) /.test(s)) c.events = /^GET \/events[?\s]/.test(s);
      if (c.events && freezing) {
        c.frozen = true;
        return;
      }
      c.upstream.write(d);
    });
    c.upstream.on("data", (d) => {
      if (!c.frozen) client.write(d);
    });
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
  const streams = () => [...conns].filter((c) => c.events && !c.frozen);
  return new Promise((resolve, reject) => {
    srv.once("error", reject);
    srv.listen(0, address, () => resolve({
      url: `http://${address}:${srv.address().port}`,
      eventStreams: () => streams().length,
      cutEvents() {
        const cut = streams();
        for (const c of cut) {
          c.client.destroy();
          c.upstream.destroy();
        }
        return cut.length;
      },
      freezeEvents() {
        freezing = true;
        const frozen = streams();
        for (const c of frozen) c.frozen = true;
        return frozen.length;
      },
      thawEvents() {
        freezing = false;
        for (const c of conns) {
          if (c.frozen) {
            c.client.destroy();
            c.upstream.destroy();
          }
        }
      },
      close() {
        for (const c of conns) {
          c.client.destroy();
          c.upstream.destroy();
        }
        srv.close();
      },
    }));
  });
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

// watchLiveRollback keeps up to POOL contract pages open, on one origin of
// their own (one event stream between them): on the newest contracts and
// on those that stepped last (where the devnet's next steps, and so the
// steps its rollbacks undo, mostly are), each for at least MIN_OPEN, until
// a rollback undoes a step of a contract whose page was open (drawn) before
// the rollback came. That page must then show the step struck through,
// marked with the seq of the rolled_back record that undid it, and flashed
// (the page flashes a step only after its first drawing: "new" when the step
// came with the rollback already known, "rollback" when the page had drawn
// it applied), within EXPECT; if it does not, the check fails. How long the
// wait for such a rollback takes is up to the devnet (ms at most); the
// check itself is decided by what the test saw. Only contracts whose
// creation is deeper than any rollback can reach are opened (their pages
// never 404). It returns what it saw: {hit} or {missed}, or null when no
// rollback hit an open page in time.
async function watchLiveRollback(context, errors, ms) {
  const POOL = 12;
  const MIN_OPEN = 15000;
  const EXPECT = 30000;
  const DEPTH = 4; // deeper than the devnet's rollbacks (--rollback-depth 3)
  const host = await startProxy("127.0.0.2");
  const ctl = new AbortController();
  const res = await fetch(`${QUERY_URL}/events?all=true&from=tip`, { signal: ctl.signal });
  if (!res.ok) throw new Error(`GET /events: ${res.status}`);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  const startedAt = Date.now();
  const created = new Map(); // contractId -> creation {blockNo, slot}, of open contracts
  const stepped = new Map(); // contractId -> block number of its last step, of open contracts
  const steps = []; // recent steps {seq, slot, contractId}
  const pool = new Map(); // contractId -> { page, at, readyAt }
  const expected = []; // {contractId, step, rollback, at}: rollbacks that undid a step an open page showed
  const rollbacks = new Set(); // seqs of rolled_back records seen
  let tipBlock = 0;
  let opened = 0;
  const eligible = (id) => created.has(id) && created.get(id).blockNo <= tipBlock - DEPTH;
  let undone = 0; // steps the rollbacks undid
  // The open contracts created before the watch began are candidates too
  // (the map oldest first, as the stream adds them).
  for (const c of (await api("/contracts?status=open&order=desc&limit=200")).results.reverse()) created.set(c.contractId, { blockNo: c.block.blockNo, slot: c.block.slot });
  // The stream is read as fast as it comes, apart from the pages' checks,
  // so that what the test knows is never behind what the pages show.
  const note = (r) => {
    if (r.kind === "rolled_back") {
      rollbacks.add(r.seq);
      const to = r.payload.to.slot;
      for (let j = steps.length - 1; j >= 0; j--) {
        const st = steps[j];
        if (st.slot <= to) continue;
        undone++;
        const open = pool.get(st.contractId);
        if (open && open.firstSeq !== null && open.firstSeq < r.seq) expected.push({ contractId: st.contractId, step: st.seq, rollback: r.seq, at: Date.now() });
        steps.splice(j, 1);
      }
      for (const [id, c] of created) if (c.slot > to) created.delete(id); // (until a fork brings it again)
      tipBlock = r.block.blockNo;
    } else if (r.block) tipBlock = Math.max(tipBlock, r.block.blockNo);
    if (r.kind === "contract_created") created.set(r.contractId, { blockNo: r.block.blockNo, slot: r.block.slot });
    if (r.kind === "inputs_applied") {
      steps.push({ seq: r.seq, slot: r.block.slot, contractId: r.contractId });
      if (steps.length > 500) steps.shift();
      stepped.delete(r.contractId);
      if (r.payload.closed) created.delete(r.contractId);
      else stepped.set(r.contractId, r.block.blockNo); // (the map in order of the last step)
    }
  };
  let ended = false;
  const reading = eachRecord(reader, (r) => {
    note(r);
    return false;
  }).catch(() => {}).finally(() => {
    ended = true;
  });
  let said = Date.now();
  try {
    while (Date.now() - startedAt < ms || expected.length) {
      await sleep(500);
      if (ended) return null;
      if (Date.now() - said > 20000) {
        said = Date.now();
        log(`     watching: ${pool.size} pages open (${opened} opened), ${rollbacks.size} rollbacks undid ${undone} steps, ${expected.length} on open pages`);
      }
      for (const [contractId, x] of pool) {
        if (x.firstSeq === null) continue;
        const hits = await x.page.evaluate(() => window.__rollbackFlashes || []).catch(() => []);
        const hit = hits.find((h) => rollbacks.has(h.rollback) && h.struck);
        if (hit) return { hit: { contractId, ...hit, pages: opened, rollbacks: rollbacks.size, waited: Math.round((Date.now() - startedAt) / 1000) } };
      }
      const late = expected.find((e) => Date.now() - e.at > EXPECT);
      if (late) {
        const x = pool.get(late.contractId);
        const hits = x ? await x.page.evaluate(() => window.__rollbackFlashes || []).catch(() => null) : null;
        return { missed: { ...late, hits } };
      }
      // The pages wanted: the newest contracts, and those that stepped last.
      const newest = [...created.keys()].filter(eligible).slice(-POOL / 2);
      const active = [...stepped.keys()].filter((id) => eligible(id) && !newest.includes(id)).slice(-POOL / 2);
      const want = new Set([...newest, ...active]);
      for (const [id, x] of pool) {
        const keep = want.has(id) || Date.now() - x.at < MIN_OPEN || expected.some((e) => e.contractId === id);
        if (!keep) {
          pool.delete(id);
          await x.page.close();
        }
      }
      const candidate = [...want].reverse().find((id) => !pool.has(id));
      if (!candidate || pool.size >= POOL) continue;
      // The timeline is drawn again on every refresh, so the page records
      // each step it flashes as rolled back when it is drawn.
      const x = { page: null, at: Date.now(), firstSeq: null };
      pool.set(candidate, x);
      opened++;
      x.page = await openPage(context, `${host.url}/ui/contract?id=${enc(candidate)}`, errors, (p) => p.addInitScript(() => {
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
      // Once it has drawn its timeline (as of firstSeq), a later rollback must show.
      x.page.waitForFunction(() => document.querySelector("#timeline li[data-seq]") && document.documentElement.dataset.firstSeq, null, { timeout: 30000 })
        .then((h) => h.jsonValue()).then((seq) => {
          x.firstSeq = Number(seq);
        }, () => {});
    }
    return null;
  } finally {
    ctl.abort();
    await reading;
    for (const { page } of pool.values()) if (page) await page.close().catch(() => {});
    host.close();
  }
}

// newContractShown waits until every page has listed a contract created
// after now (pages opened with watchRows; a busy devnet may push a new
// contract off a page's first 25 rows before a page's next read, so any
// newer one counts); it returns the newest seq they all showed, or null.
async function newContractShown(pages, what) {
  const since = (await api("/status")).historySeq;
  const ok = await Promise.all(pages.map((p) => p.waitForFunction((since) => (window.__rowsSeen || 0) > since, since, { timeout: 60000 }).then(() => true, () => false)));
  const loads = await Promise.all(pages.map((p) => p.evaluate(() => performance.getEntriesByType("navigation").length)));
  if (loads.some((n) => n !== 1)) throw new Error(`${what}: a page was reloaded`);
  if (!ok.every(Boolean)) throw new Error(`${what}: ${ok.filter((x) => !x).length} of ${pages.length} pages listed no contract created after seq ${since} within 60 s`);
  return Math.min(...(await Promise.all(pages.map((p) => p.evaluate(() => window.__rowsSeen)))));
}

// watchRows records in a page the newest creation seq of the rows its
// contracts list ever showed (window.__rowsSeen).
const watchRows = (p) => p.addInitScript(() => {
  window.__rowsSeen = 0;
  new MutationObserver((muts) => {
    for (const m of muts) for (const n of m.addedNodes) if (n.nodeType === 1 && n.tagName === "TR" && n.dataset.seq) window.__rowsSeen = Math.max(window.__rowsSeen, Number(n.dataset.seq));
  }).observe(document, { childList: true, subtree: true });
});

// checkLeader opens three list tabs without SharedWorker, on an origin of
// their own: one leads and holds the only event stream; closing it hands
// the stream to another, and both that remain show a new contract.
async function checkLeader(context, errors) {
  const host = await startProxy("127.0.0.3");
  try {
    const noWorker = async (p) => {
      await watchRows(p);
      await p.addInitScript(() => {
        delete window.SharedWorker;
      });
    };
    const tabs = await Promise.all([0, 1, 2].map(() => openPage(context, host.url + "/", errors, noWorker)));
    const modes = async () => Promise.all(tabs.map((t) => t.evaluate(() => document.documentElement.dataset.liveMode).catch(() => "closed")));
    await Promise.all(tabs.map((t) => t.waitForFunction(() => document.querySelector("#contracts tbody tr[data-id]") && /^(live|resumed)$/.test(document.documentElement.dataset.live || ""), null, { timeout: 30000 })));
    const first = await modes();
    check(first.filter((m) => m === "leader").length === 1 && first.filter((m) => m === "follower").length === 2 && host.eventStreams() === 1,
      `without SharedWorker, 3 tabs: one leader, two followers, ${host.eventStreams()} event stream`, first);
    const leader = tabs[first.indexOf("leader")];
    const rest = tabs.filter((t) => t !== leader);
    await leader.close();
    const taken = await Promise.any(rest.map((t) => t.waitForFunction(() => document.documentElement.dataset.liveMode === "leader", null, { timeout: 15000 }))).then(() => true, () => false);
    const after = await Promise.all(rest.map((t) => t.evaluate(() => document.documentElement.dataset.liveMode)));
    check(taken && after.filter((m) => m === "leader").length === 1, `when the leader closes, another tab takes over (${after.join(", ")})`, after);
    const shown = await newContractShown(rest, "after the takeover");
    check(shown && host.eventStreams() === 1, `both remaining tabs show a contract created after the takeover (seq ${shown} or later; ${host.eventStreams()} event stream)`);
    for (const t of rest) await t.close();
  } finally {
    host.close();
  }
}

// checkStall freezes the list's event stream, and any it opens again (the
// proxy passes nothing on and keeps the connections open, as a dead
// network would): within a heartbeat's allowance the header says the
// updates stalled, and keeps saying so; once the proxy lets go, the stream
// is opened again from its cursor and the page is live again.
async function checkStall(list, proxy) {
  const frozen = proxy.freezeEvents();
  const at = Date.now();
  await list.waitForFunction(() => document.getElementById("tip").dataset.state === "stalled", null, { timeout: 60000 });
  const label = await list.textContent("#tip .tip-state");
  check(frozen === 1 && /^stalled: no word from the service for \d+ s$/.test(label), `a frozen event stream: after ${((Date.now() - at) / 1000).toFixed(0)} s the header says "${label}"`);
  const banner1 = await list.textContent("#banner");
  check(/stalled/.test(banner1), `and the banner: "${banner1}"`);
  proxy.thawEvents();
  await list.waitForFunction(() => document.documentElement.dataset.live === "resumed" && document.getElementById("tip").dataset.state !== "stalled", null, { timeout: 60000 });
  const banner = await list.textContent("#banner");
  check(/resumed after cursor \S+/.test(banner), `once the network lets go, the stream is opened again from its cursor: "${banner}"`);
}

async function shot(page, name) {
  const file = path.join(ARTIFACTS, name);
  await page.screenshot({ path: file, fullPage: true });
  log(`     screenshot ${file}`);
  return file;
}

// docShot writes a picture for docs/explorer.md into DOC_SCREENSHOTS (when
// set): the top of a page at a readable size, in a scheme and a width.
async function docShot(page, name, { width = 1280, height = 1400, scheme = "light" } = {}) {
  if (!DOC_SCREENSHOTS) return;
  const size = page.viewportSize();
  await page.emulateMedia({ colorScheme: scheme });
  await page.setViewportSize({ width, height });
  // (The picture shows the page at rest: rows and steps just flashed by
  // the devnet's blocks, many a second, are shown without the flash.)
  await page.evaluate(() => {
    window.scrollTo(0, 0);
    for (const el of document.querySelectorAll(".flash-new, .flash-update, .flash-rollback")) el.classList.remove("flash-new", "flash-update", "flash-rollback");
  });
  const file = path.join(DOC_SCREENSHOTS, name);
  await page.screenshot({ path: file, fullPage: false });
  log(`     documentation picture ${file}`);
  await page.setViewportSize(size);
  await page.emulateMedia({ colorScheme: "light" });
}

// checkTransactionPages opens the transaction page of a step, of a
// creation, of a withdrawal and of a transaction the follower does not
// know, and checks each against the API.
async function checkTransactionPages(context, errors, base, stepTx, wd) {
  const step = await api(`/transactions/${stepTx.txId}`);
  const page = await openPage(context, `${base}/ui/transaction?id=${stepTx.txId}`, errors);
  await page.waitForSelector('[data-section="step"]', { timeout: 15000 });
  const got = await page.evaluate(() => {
    const sec = document.querySelector('[data-section="step"]');
    const pres = [...sec.querySelectorAll("details.json pre")].map((p) => p.textContent);
    return { inputs: sec.querySelectorAll("ul.inputs > li, [data-input=none]").length, text: sec.textContent, pres, payouts: sec.querySelectorAll("tr[data-payout]").length, output: sec.querySelector("[data-output]")?.dataset.output };
  });
  const d = step.details;
  const redeemer = JSON.parse(got.pres[0]);
  check(got.inputs === Math.max(1, d.inputs.length) && JSON.stringify(redeemer) === JSON.stringify(d.inputs) && /slots \d+ \(inclusive\) to \d+ \(exclusive\)/.test(got.text) &&
    got.payouts === (d.payouts || []).length && got.output === (d.output ? "contract" : "none") && (!d.output || JSON.stringify(JSON.parse(got.pres[1])) === JSON.stringify(d.output.datum)),
    `the transaction page of step ${stepTx.txId.slice(0, 10)}…: its ${d.inputs.length} input(s) in words and as the redeemer, validity interval, ${d.output ? "the contract's output with its datum" : "no output"}, ${got.payouts} payout(s)`, got);
  await page.goto(`${base}/ui/transaction?id=${stepTx.contractId.split("#")[0]}`);
  await page.waitForSelector('[data-section="creation"]', { timeout: 15000 });
  const made = await page.$$eval('[data-section="creation"] a[data-contract]', (l) => l.map((a) => a.dataset.contract));
  check(made.includes(stepTx.contractId), `the transaction page of a creation names the contract it created (${made.length} link(s))`, made);
  await page.goto(`${base}/ui/transaction?id=${wd.withdrawalId}`);
  await page.waitForSelector('[data-section="withdrawal"] tr[data-payout]', { timeout: 15000 });
  const rows = await page.$$eval('[data-section="withdrawal"] tr[data-payout]', (l) => l.map((tr) => tr.dataset.payout));
  check(JSON.stringify(rows) === JSON.stringify(wd.payouts.map((p) => p.payoutId)), `the transaction page of a withdrawal lists its ${rows.length} payout(s)`);
  await page.goto(`${base}/ui/transaction?id=${"0".repeat(64)}`);
  await page.waitForFunction(() => document.getElementById("tx-status").dataset.found === "no", null, { timeout: 15000 });
  check(/knows no Marlowe activity/.test(await page.textContent("#tx-status")), "the transaction page of an unknown transaction says the follower knows nothing of it");
  await page.close();
}

// checkPayoutsPage: the payouts page lists the available payouts as the
// API does, by role token too, and the withdrawn ones with their
// withdrawals; it is in the navigation.
async function checkPayoutsPage(context, errors, base) {
  const page = await openPage(context, `${base}/`, errors);
  await page.click('header nav a[href$="ui/payouts"]');
  await page.waitForSelector("#payouts tbody tr", { timeout: 15000 });
  // (Payouts are paid and withdrawn every second on the devnet: the page
  // shows a state a moment old. Each payout it shows was available in that
  // state, and every payout available now that it should list, one older
  // than the newest it shows, is among them: a payout stays available until
  // withdrawn.)
  // A rollback after the page's seq can make a payout available again
  // whose withdrawal it undid (available now, withdrawn as of the page's
  // seq): such a state is judged again on the page read anew, until the
  // two agree or 20 s pass.
  let pageSeq, shown, wrong, missing, ordered;
  for (const until = Date.now() + 20000; ; await page.reload()) {
    await page.waitForFunction(() => document.querySelector("#payouts tbody tr[data-payout]") && document.getElementById("payouts").dataset.seq, null, { timeout: 15000 });
    [pageSeq, shown] = await page.evaluate(() => [Number(document.getElementById("payouts").dataset.seq),
      [...document.querySelectorAll("#payouts tbody tr[data-payout]")].map((tr) => ({ id: tr.dataset.payout, status: tr.dataset.status, seq: Number(tr.dataset.seq) }))]);
    wrong = [];
    for (const x of shown) {
      const p = await api(`/payouts/${enc(x.id)}`).catch(() => null);
      if (!p) continue; // a rollback took it away since
      const availableThen = p && p.seq <= pageSeq && (p.status === "available" || (p.status === "withdrawn" && p.withdrawal.seq > pageSeq));
      if (!availableThen || x.status !== "available") wrong.push({ ...x, now: p && p.status, withdrawnAt: p && p.withdrawal && p.withdrawal.seq });
    }
    const newestShown = Math.max(...shown.map((x) => x.seq));
    missing = (await api("/payouts?status=available&limit=100")).results.filter((p) => p.seq < newestShown && !shown.some((x) => x.id === p.payoutId)).map((p) => p.payoutId);
    ordered = shown.every((x, i) => i === 0 || shown[i - 1].seq <= x.seq);
    if ((wrong.length === 0 && missing.length === 0) || Date.now() > until) break;
  }
  check(shown.length > 0 && wrong.length === 0 && missing.length === 0 && ordered, `the payouts page (from the navigation) lists ${shown.length} payouts available as of its seq ${pageSeq}, in chain order, none missing`, { wrong, missing });
  // By role token.
  const one = (await api("/payouts?status=available&limit=5")).results.find((p) => p.role !== undefined && p.role !== null && /^[\x20-\x7e]*$/.test(p.role));
  if (one) {
    const token = `${one.roleTokenMintingPolicyId}.${one.role}`;
    await page.fill('#filters input[name="roleToken"]', token);
    await page.press('#filters input[name="roleToken"]', "Enter");
    await page.waitForFunction((t) => new URLSearchParams(document.getElementById("payouts").dataset.query || "").get("roleToken") === t, token, { timeout: 10000 });
    // (The payout may be withdrawn meanwhile: every payout shown is one of
    // the token's, and every one still available is shown.)
    const ofToken = new Set((await api(`/payouts?roleToken=${encodeURIComponent(token)}&limit=1000`)).results.map((p) => p.payoutId));
    const shown = await page.$$eval("#payouts tbody tr[data-payout]", (l) => l.map((tr) => tr.dataset.payout));
    const pageSeq = await page.$eval("#payouts", (t) => Number(t.dataset.seq));
    const still = (await api(`/payouts?status=available&roleToken=${encodeURIComponent(token)}&limit=100`)).results.filter((p) => p.seq <= pageSeq).map((p) => p.payoutId);
    check(shown.every((id) => ofToken.has(id)) && still.every((id) => shown.includes(id)) && (shown.length > 0 || still.length === 0), `by role token ${one.role || "“”"}: ${shown.length} payout(s), as the API lists them`, { shown, still });
  }
  // Withdrawn: each with its withdrawal.
  await page.goto(`${base}/ui/payouts?status=withdrawn`);
  await page.waitForSelector("#payouts tbody tr[data-payout]", { timeout: 15000 });
  const rows = await page.$$eval("#payouts tbody tr[data-payout]", (l) => l.map((tr) => [tr.dataset.payout, tr.querySelector("[data-withdrawal]")?.dataset.withdrawal]));
  const byId = new Map((await api("/payouts?status=withdrawn&limit=25")).results.map((p) => [p.payoutId, p.withdrawal && p.withdrawal.withdrawalId]));
  check(rows.length > 0 && rows.every(([id, w]) => !byId.has(id) || byId.get(id) === w), `withdrawn payouts each link their withdrawal (${rows.length})`);
  await page.close();
}

// checkApiPage: the API page draws every operation of /openapi.json; its
// search filters them; a schema link opens the schema.
async function checkApiPage(context, errors, base) {
  const doc = await api("/openapi.json");
  const nOps = Object.values(doc.paths).reduce((n, item) => n + ["get", "head", "post", "put", "patch", "delete", "options"].filter((m) => item[m]).length, 0);
  const page = await openPage(context, `${base}/`, errors);
  await page.click('header nav a[href$="ui/api"]');
  await page.waitForSelector("details.op", { timeout: 15000 });
  const shown = await page.$$eval("details.op", (l) => l.length);
  await page.fill("#api-q", "payouts");
  const filtered = await page.$$eval("details.op:not([hidden])", (l) => l.map((d) => d.dataset.path));
  const link = await page.$("details.op code.type a[href^='#schema-']");
  const target = link && (await link.getAttribute("href"));
  if (link) {
    await page.fill("#api-q", "");
    await page.$eval("details.op", (d) => (d.open = true));
    await page.evaluate((h) => (location.hash = h), target);
  }
  const opened = target ? await page.waitForFunction((id) => document.getElementById(id)?.open === true, target.slice(1), { timeout: 5000 }).then(() => true, () => false) : false;
  check(shown === nOps && filtered.length > 0 && filtered.length < nOps && filtered.some((p) => /payout/.test(p)) && opened,
    `the API page draws the ${nOps} operations of /openapi.json; "payouts" finds ${filtered.length}; a schema link opens ${target}`, { shown, nOps, filtered, target, opened });
  await shot(page, "api.png");
  await page.close();
}

// checkContractViews: a contract page's participants, its JSON and Marlowe
// notation (copied and downloaded), and a deep contract folded.
async function checkContractViews(context, errors, base) {
  const list = (await api("/contracts?order=desc&limit=100")).results.slice(10);
  const withRoles = list.find((c) => c.roleTokenMintingPolicyId) || list[0];
  const full = await api(`/contracts/${enc(withRoles.contractId)}`);
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: base });
  const page = await openPage(context, `${base}/ui/contract?id=${enc(withRoles.contractId)}`, errors);
  await page.waitForSelector("#parties tr[data-party]", { timeout: 15000 });
  const parties = await page.$$eval("#parties tr[data-party]", (l) => l.map((tr) => tr.dataset.party));
  const roles = [...rolesIn(full.initialContract)].map((r) => "role:" + r);
  const addrs = [...addressesIn(full.initialContract)].map((a) => "address:" + a);
  check([...roles, ...addrs].every((k) => parties.includes(k)), `the participants: ${parties.length} (${parties.slice(0, 3).join(", ")}…), every role and address of its contract`, { parties, roles, addrs });
  await items.partiesPaid(page, withRoles.contractId);
  const json = JSON.parse(await page.textContent("#source"));
  check(JSON.stringify(json) === JSON.stringify(full.initialContract), "the contract's JSON as created, as the API has it");
  await page.check('input[name="src-form"][value="marlowe"]');
  await page.waitForFunction(() => document.getElementById("source").dataset.form === "marlowe", null, { timeout: 5000 });
  const marlowe = await page.textContent("#source");
  check(/^(When|Close|Pay|If|Let|Assert)\b/.test(marlowe), `and in Marlowe notation: "${marlowe.split("\n")[0]}…"`);
  await page.click("#src-copy");
  await page.waitForFunction(() => /Copied/.test(document.getElementById("src-note").textContent), null, { timeout: 5000 });
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  const [download] = await Promise.all([page.waitForEvent("download", { timeout: 10000 }), page.click("#src-download")]);
  const file = path.join(ARTIFACTS, download.suggestedFilename());
  await download.saveAs(file);
  check(copied.trim() === marlowe.trim() && fs.readFileSync(file, "utf8").trim() === marlowe.trim() && /\.marlowe$/.test(file), `copied and downloaded (${path.basename(file)})`);
  await page.check('input[name="src-which"][value="current"]');
  await page.check('input[name="src-form"][value="json"]');
  await page.waitForFunction(() => document.getElementById("source").dataset.which === "current", null, { timeout: 5000 });
  const now = await api(`/contracts/${enc(withRoles.contractId)}`);
  const cur = await page.textContent("#source");
  check(now.currentContract === null ? /closed/.test(cur) : JSON.stringify(JSON.parse(cur)) === JSON.stringify(now.currentContract) || now.lastSeq !== full.lastSeq, "and what is left of it now");
  await page.close();
  // A deep contract folds: the tree fits the page's width.
  // (The guessing game that went deepest: its path runs several levels down.)
  // (Waits, up to 90 s, for the devnet to have played one a few steps
  // deep, past the five newest, which may still be moving.)
  let deep = null;
  for (const until = Date.now() + 90000; ; await sleep(1000)) {
    deep = null;
    for (const c of (await api("/contracts?tag=guessing-game&order=desc&limit=60")).results.slice(5)) if (!deep || c.steps > deep.steps) deep = c;
    if ((deep && deep.steps >= 2) || Date.now() > until) break;
  }
  if (!deep) deep = list[0];
  const dp = await openPage(context, `${base}/ui/contract?id=${enc(deep.contractId)}`, errors);
  await dp.waitForSelector("#tree li[data-kind]", { timeout: 15000 });
  const t = await dp.evaluate(() => ({ folded: [...document.querySelectorAll("#tree details:not([open]) > summary .folded")].length, levels: Math.max(...[...document.querySelectorAll("#tree li[data-level]")].map((l) => Number(l.dataset.level))),
    fits: document.getElementById("tree").scrollWidth <= document.getElementById("tree").clientWidth + 1, taken: document.querySelectorAll("#tree li.taken").length }));
  check(t.fits && (t.folded > 0 || t.levels < 3) && (deep.steps === 0 || t.taken > deep.steps), `a deep contract (${deep.steps} steps, ${deep.contractId.slice(0, 10)}…, tags ${Object.keys(deep.tags).join(", ") || "none"}): ${t.folded} branch(es) folded, ${t.taken} node(s) on the path taken, it fits the width`, t);
  await shot(dp, "contract-deep.png");
  await dp.close();
}

// checkPhone: on a 390 px wide screen nothing needs horizontal scrolling
// (the list's rows become cards).
async function checkPhone(context, errors, base) {
  const page = await openPage(context, `${base}/`, errors, (p) => p.setViewportSize({ width: 390, height: 844 }));
  await page.waitForSelector("#contracts tbody tr[data-id]", { timeout: 15000 });
  const widths = [];
  widths.push(["/", await page.evaluate(() => document.documentElement.scrollWidth)]);
  await shot(page, "contracts-phone.png");
  await docShot(page, "explorer-phone.png", { width: 390, height: 844 });
  // (Each page's network badge is read on the way.)
  const badges = [["/", await page.textContent("#network")]];
  const c = (await api("/contracts?order=desc&limit=40")).results.slice(10).find((x) => x.steps > 0);
  const tx = (await api(`/contracts/${enc(c.contractId)}/history?limit=100`)).results.find((r) => r.kind === "inputs_applied");
  for (const target of [`ui/contract?id=${enc(c.contractId)}`, `ui/transaction?id=${tx.txId}`, "ui/payouts", "ui/status", "ui/api"]) {
    await page.goto(`${base}/${target}`);
    await page.waitForSelector("#main h1", { timeout: 15000 });
    await page.waitForLoadState("load");
    await page.waitForFunction(() => document.getElementById("network")?.dataset.network, null, { timeout: 15000 });
    widths.push([target.split("?")[0], await page.evaluate(() => document.documentElement.scrollWidth)]);
    badges.push([target.split("?")[0], await page.textContent("#network")]);
  }
  check(widths.every(([, w]) => w <= 390), `390 px wide, no page scrolls sideways (${widths.map(([p, w]) => `${p} ${w}`).join(", ")})`, widths);
  check(badges.every(([, b]) => b === "devnet"), `the network's badge on every page (${badges.map(([p, b]) => `${p} ${b}`).join(", ")})`, badges);
  await page.close();
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
const gonePages = new Set(); // contracts whose page said they are missing (a rollback took them away)
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
  // Its transaction, address and policy link to the configured Cardano explorer.
  const links = await page.$$eval("#facts a.ext", (l) => l.map((a) => [a.dataset.ext, a.getAttribute("href"), a.getAttribute("rel")]));
  const c0 = await api(`/contracts/${enc(id)}`);
  const want = [["address", c0.address], ["tx", id.split("#")[0]], ...(c0.roleTokenMintingPolicyId ? [["policy", c0.roleTokenMintingPolicyId]] : [])];
  check(want.every(([k, v]) => links.some(([kk, href, rel]) => kk === k && href === LINKS[k].replace("{id}", encodeURIComponent(v)) && /noreferrer/.test(rel))),
    `the header links ${want.map(([k]) => k).join(", ")} to the configured Cardano explorer`, { links, want });
  const rel = await page.$$eval("#tree .deadline time", (l) => l.map((t) => [t.getAttribute("datetime"), t.textContent, t.getAttribute("title")]));
  check(rel.length > 0 && rel.every(([iso, r, title]) => /^\d{4}-\d\d-\d\dT/.test(iso || "") && /^(in .+|.+ ago|now)$/.test(r || "") && /\d{4}/.test(title || "")),
    `the tree's deadlines say how far away they are, the date on hover (${rel[0] && rel[0][1]}, ${rel[0] && rel[0][2]})`, rel.slice(0, 3));
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

const items = makeItems({ api, check, openPage, enc, LINKS, QUERY_URL, waitForRecord, docShot, sleep });

// checkStatusBehind: the status page of a follower catching up, its
// /status and /metrics answered as the service's own with the node 60,000
// blocks ahead and closing at 190 blocks/s (200 read, the tip growing 10):
// the bar shows the share synced and the time to go. The page runs on a
// clock of the test's (Playwright's fake timers, which are the whole
// context's: the other pages, done with, are closed first): the answers are
// a function of the page's own time, and the page reads once a second of
// that time, stepped by the test one read at a time. So the rates the page
// works out are exactly those the answers were made with, however slowly a
// busy machine serves the reads, and the time to go is exact.
async function checkStatusBehind(context, errors, base) {
  let zero = null; // the page's time at which t is 0
  const catchingUp = async (page) => {
    const now = await page.evaluate(() => Date.now());
    const t = zero === null ? 0 : (now - zero) / 1000;
    return { t, tip: 100000 + Math.round(10 * t), behind: Math.max(1, Math.round(60000 - 190 * t)) };
  };
  const page = await openPage(context, base + "/ui/status", errors, async (page) => {
    for (const other of context.pages()) if (other !== page) await other.close();
    await page.clock.install();
    await page.route((u) => u.pathname === "/status", async (route) => {
      const res = await route.fetch();
      const st = await res.json();
      const { tip, behind } = await catchingUp(page);
      st.nodeTip = { ...st.nodeTip, blockNo: tip };
      st.followerPoint = { ...st.followerPoint, blockNo: tip - behind };
      st.blocksBehind = behind;
      st.syncProgress = (tip - behind) / tip;
      await route.fulfill({ response: res, json: st });
    });
    await page.route((u) => u.pathname === "/metrics", async (route) => {
      const res = await route.fetch();
      const { t } = await catchingUp(page);
      const text = (await res.text()).split("\n").filter((l) => !/^marlowe_(blocks_total|node_tip_block_number)[ {]/.test(l)).join("\n") +
        `\nmarlowe_blocks_total ${Math.round(40000 + 200 * t)}\nmarlowe_node_tip_block_number ${100000 + Math.round(10 * t)}\n`;
      await route.fulfill({ response: res, body: text });
    });
  });
  // The page's first read ran on time flowing; from here its time stands
  // still but for the test's steps, from 15 s ahead (the reads before fall
  // out of the ten seconds the time to go is worked out over). Each step is
  // a second; the next waits for the page's read of the one before. (The
  // waits poll from here: the page's own timers stand still.)
  const inPage = (fn, arg) => page.evaluate(fn, arg);
  const until = async (fn, arg, what) => {
    const end = Date.now() + 30000;
    while (!(await inPage(fn, arg))) {
      if (Date.now() > end) throw new Error("the status page behind: timed out waiting for " + what);
      await sleep(50);
    }
  };
  const samples = () => Number(document.getElementById("chart").dataset.samples || 0);
  await until(() => document.getElementById("sync-text").textContent.length > 0, null, "its first read");
  zero = (await inPage(() => Date.now())) + 15000;
  await page.clock.pauseAt(zero);
  for (let step = 0; step < 12; step++) {
    const before = await inPage(samples);
    await page.clock.runFor(1000);
    await until((n) => Number(document.getElementById("chart").dataset.samples || 0) > n, before, `the read of step ${step + 1}`);
  }
  const text = (await page.textContent("#sync-text")).trim();
  const bar = await page.$eval("#progress", (p) => p.value);
  const m = /([\d,]+) blocks behind the node · about (?:(\d+) min )?(\d+) s to go at the current rate/.exec(text);
  const etaSecs = m ? Number(m[2] || 0) * 60 + Number(m[3]) : NaN;
  const wantEta = Number((m ? m[1] : "0").replace(/,/g, "")) / 190;
  check(bar > 0.35 && bar < 0.45 && m && Math.abs(etaSecs - wantEta) <= 1,
    `while behind, the status page shows the bar at ${(bar * 100).toFixed(1)} % and "${text}" (${Math.round(wantEta)} s expected)`);
  await shot(page, "status-behind.png");
  await page.close();
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
  // Every request of every page and tab off the pages' own hosts (the
  // test's proxies, on 127.0.0.x): only the explorer links clicked may be.
  const offPort = [];
  context.on("request", (r) => {
    const u = r.url();
    if (!/^(data|blob|about|chrome-error):/.test(u) && !/^127\.0\.0\.\d+$/.test(new URL(u).hostname)) offPort.push(u);
  });
  const clicked = new Set();
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
    check((await list.textContent("#network")) === "devnet", "the header shows the network's badge");

    // Twelve more tabs: one event stream for all of them, and each shows a
    // contract created after they opened, without reload.
    const tabs = [];
    for (let i = 0; i < 3; i++) tabs.push(...(await Promise.all([0, 1, 2, 3].map(() => openPage(context, BASE + "/", errors, watchRows))))); // (four at a time: a loaded machine)
    await Promise.all(tabs.map((t) => t.waitForFunction(() => document.querySelector("#contracts tbody tr[data-id]") && /^(live|resumed)$/.test(document.documentElement.dataset.live || ""), null, { timeout: 60000 })));
    const modes = await Promise.all([list, ...tabs].map((t) => t.evaluate(() => document.documentElement.dataset.liveMode)));
    check(modes.every((m) => m === "shared") && proxy.eventStreams() === 1, `13 tabs of the explorer hold ${proxy.eventStreams()} event stream (a shared worker's)`, modes);
    const shown = await newContractShown(tabs, "12 tabs");
    check(shown, `each of the 12 tabs shows a contract created after they opened (at seq ${shown} or later), without reload`);
    for (const t of tabs) await t.close();

    // Without SharedWorker (Chrome on Android): one tab leads (a Web Lock)
    // and tells the others over a BroadcastChannel; when it closes another
    // takes over from the last seq it was told.
    await checkLeader(context, errors);

    // Filters: status=open from the form; the URL says so and every row is open.
    await list.selectOption('select[name="status"]', "open");
    await list.waitForFunction(() => location.search.includes("status=open") && (document.getElementById("contracts").dataset.query || "").includes("status=open") &&
      document.querySelectorAll("#contracts tbody tr[data-id]").length > 0, null, { timeout: 10000 });
    // (A row the stream told closed since the list's read says so at once,
    // until the next read drops it: it must be closed.)
    const statuses = await list.$$eval("#contracts tbody tr[data-id] .badge.open, #contracts tbody tr[data-id] .badge.closed", (b) => b.map((x) => [x.textContent, x.dataset.ahead ? x.closest("tr").dataset.id : null]));
    const ahead = statuses.filter(([, id]) => id);
    const notClosed = [];
    for (const [, id] of ahead) {
      const res = await fetch(`${QUERY_URL}/contracts/${enc(id)}`);
      if (res.status !== 404 && (!res.ok || (await res.json()).status !== "closed")) notClosed.push(id); // (404: a rollback took it away since)
    }
    check(statuses.length > 0 && statuses.every(([s, id]) => s === "open" || id) && notClosed.length === 0,
      `the status filter shows only open contracts (${statuses.length}; ${ahead.length} closed a moment ago, as the live updates told)`, { statuses, notClosed });
    await list.selectOption('select[name="status"]', "");
    await list.waitForFunction(() => !(document.getElementById("contracts").dataset.query || "").includes("status="), null, { timeout: 10000 });
    await items.typeFilter(list);
    await items.listPictures(list);
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
    // Input that looks like an id or an address but does not parse says
    // why, and filters nothing.
    for (const [text, why] of [["addr_test1qqbad", /looks like a testnet address \(bech32\), but it is too short/], ["deadbeef#0", /looks like a contract id \(TXID#INDEX\), but its transaction id has 8 hex digits/],
      [address.slice(0, -1) + (address.endsWith("q") ? "p" : "q"), /checksum does not match/], ["f".repeat(63), /looks like a transaction id \(64 hex digits\), but it has 63/]]) {
      const queryBefore = await list.$eval("#contracts", (t) => t.dataset.query);
      await list.fill("#q", text);
      await list.press("#q", "Enter");
      await list.waitForFunction(() => document.getElementById("search-result").dataset.kind === "invalid", null, { timeout: 5000 });
      const said = await list.textContent("#search-result");
      check(why.test(said) && (await list.$eval("#contracts", (t) => t.dataset.query)) === queryBefore && !new URL(list.url()).searchParams.has("tag"), `searching "${text.length > 20 ? text.slice(0, 16) + "…" : text}" says why it is not searched: "${said}"`);
    }

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
    // The page count, and a jump to page 3 (its contracts older than page 2's).
    const pageNo = await list.textContent("#page-no");
    const total = (await api("/contracts?limit=1")).total;
    const pages = Number((/^page 1 of ([\d,]+)$/.exec(pageNo) || [])[1]?.replace(/,/g, ""));
    check(Math.abs(pages - Math.ceil(total / 10)) <= 1, `the pager says "${pageNo}" (${total} contracts, 10 a page)`);
    await list.fill("#jump input[name=page]", "3");
    await list.press("#jump input[name=page]", "Enter");
    await list.waitForFunction(() => /^page 3 of/.test(document.getElementById("page-no").textContent) && document.querySelectorAll("#contracts tbody tr[data-id]").length > 0, null, { timeout: 15000 });
    // (The list grows meanwhile: page 3 is a run of 10 contracts of the list
    // with at least 20 newer ones, as of the jump.)
    const page3 = await list.$$eval("#contracts tbody tr[data-id]:not(.gone)", (rows) => rows.map((r) => Number(r.dataset.seq)));
    const newest = (await api("/contracts?order=desc&limit=1000")).results.map((c) => c.seq);
    const at = newest.indexOf(page3[0]);
    check(page3.length === 10 && at >= 20 && JSON.stringify(newest.slice(at, at + 10)) === JSON.stringify(page3) && new URL(list.url()).searchParams.get("page") === "3",
      `"Go to page 3" shows 10 contracts in a row of the list, ${at} newer ones before them`, { page3, at });
    await list.click("#newest");
    await list.waitForFunction(() => /^page 1 of/.test(document.getElementById("page-no").textContent), null, { timeout: 10000 });
    await list.selectOption('select[name="limit"]', "25");
    await list.waitForFunction(() => !location.search.includes("limit=") && document.querySelectorAll("#contracts tbody tr[data-id]").length > 10, null, { timeout: 10000 });

    // Each row's type, value locked and last action (read for the rows shown).
    await list.waitForFunction(() => [...document.querySelectorAll("#contracts tbody tr[data-id]:not(.gone)")].every((tr) =>
      ["type", "value", "action"].every((k) => tr.querySelector(`[data-col="${k}"]`).textContent.trim() !== "…")), null, { timeout: 30000 });
    const cells = await list.$$eval("#contracts tbody tr[data-id]:not(.gone)", (rows) => rows.slice(-8).map((tr) => ({ id: tr.dataset.id, lastSeq: Number(tr.dataset.lastSeq),
      type: tr.querySelector('[data-col="type"]').textContent, value: tr.querySelector('[data-col="value"]').textContent, action: tr.querySelector('[data-col="action"]').textContent })));
    const wrongCells = [];
    for (const x of cells) {
      const c = await fetch(`${QUERY_URL}/contracts/${enc(x.id)}`).then((r) => (r.ok ? r.json() : null));
      if (!c || c.lastSeq !== x.lastSeq) continue; // rolled back or moved on meanwhile
      const ada = c.assets.lovelace / 1e6;
      const valueOk = c.assets.lovelace === 0 && Object.keys(c.assets.tokens).length === 0 ? x.value === "nothing" : x.value.replace(/,/g, "").includes(`${ada} ADA`) || ada === 0;
      const actionOk = c.steps === 0 && c.lastSeq === c.seq ? /^created/.test(x.action) : /deposited|chose|notified|deadline passed|withdrawn|could not be read|closed/.test(x.action);
      if (!valueOk || !actionOk || !x.type.trim()) wrongCells.push({ ...x, assets: c.assets, steps: c.steps });
    }
    check(wrongCells.length === 0, `each row shows its type, value locked and last action (${cells[0].type}, ${cells[0].value}, "${cells[0].action}")`, wrongCells);

    // The totals over every contract (GET /stats): open contracts and the value they lock.
    await list.waitForSelector("#totals [data-open]", { timeout: 20000 });
    const totalsText = await list.textContent("#totals");
    const stats = await api("/stats");
    check(/^[\d,]+ of [\d,]+ contracts open, locking .+ · [\d,]+ payouts? to withdraw/.test(totalsText) && stats.contracts.open > 0, `the list says the totals: "${totalsText}"`);

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
    // applied meanwhile appears. The step is waited for on the history (the
    // contract's next inputs_applied after what the page drew), at whatever
    // pace the devnet plays it on a busy machine; only then must the page
    // show it, without reload. (Another contract when this one has ended,
    // or when the devnet leaves it waiting for a minute.)
    let live = null;
    for (let attempt = 0; attempt < 6 && !live; attempt++) {
      const created = await waitForRecord("kind=contract_created&from=tip", () => true, 60000);
      if (!created) continue;
      // Opened once the API has it (the projection follows the history), as from the list.
      const known = await fetch(`${QUERY_URL}/contracts/${enc(created.contractId)}?minSeq=${created.seq}`);
      if (!known.ok) continue; // rolled back already
      const page = await openPage(context, `${BASE}/ui/contract?id=${enc(created.contractId)}`, errors);
      // A rollback may take the contract away between that read and the
      // page's own (the page then says it is missing): another contract.
      const shown = await page.waitForSelector("#timeline li[data-seq]", { timeout: 30000 }).then(() => true, () => false);
      if (!shown) {
        const missing = await page.$eval("#load-error", (el) => !el.hidden).catch(() => false);
        if (missing) gonePages.add(created.contractId); // (its 404 is the page's way to learn it)
        await page.close();
        if (!missing) throw new Error(`contract ${created.contractId}: its page showed neither its timeline nor that it is missing`);
        continue;
      }
      const before = await page.$$eval("#timeline li[data-kind=inputs_applied]", (l) => l.length);
      const drawn = await page.$$eval("#timeline li[data-seq]", (l) => Math.max(...l.map((x) => Number(x.dataset.seq))));
      const closed = (await page.textContent("#facts")).includes("it has ended");
      const step = closed ? null : await waitForRecord(`kind=inputs_applied&contractId=${enc(created.contractId)}&from=${created.seq}`, (r) => r.seq > drawn, 60000);
      if (step) {
        await page.waitForFunction((n) => document.querySelectorAll("#timeline li[data-kind=inputs_applied]").length > n, before, { timeout: 30000 })
          .catch(() => { throw new Error(`contract ${created.contractId}: the step at seq ${step.seq} was applied while its page was open, and the page does not show it`); });
        live = { page, id: created.contractId, before };
        break;
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
    // (On a closed contract's page, deep enough that no rollback reaches
    // it: its tree is never drawn again under the keyboard.)
    const closedOnes = (await api("/contracts?status=closed&order=desc&limit=40")).results.filter((c) => c.steps > 0);
    check(closedOnes.length > 5, "the devnet has closed contracts");
    const kbPage = await openPage(context, `${BASE}/ui/contract?id=${enc(closedOnes[closedOnes.length - 1].contractId)}`, errors);
    await kbPage.waitForSelector("#tree details > summary", { timeout: 15000 });
    {
      const branches = await kbPage.$$("#tree details > summary");
      check(branches.length > 0, "the tree has branches");
      const branch = branches[branches.length - 1];
      const was = await branch.evaluate((el) => el.parentElement.open);
      await branch.focus();
      await kbPage.keyboard.press("Enter");
      // (A branch's nodes are drawn on its toggle event, a task after the key.)
      const first = await kbPage.waitForFunction(([el, open]) => el.parentElement.open === open && (!open || el.parentElement.querySelectorAll(":scope > ul > li").length > 0), [branch, !was], { timeout: 5000 }).then(() => true, () => false);
      await kbPage.keyboard.press("Enter");
      const second = await kbPage.waitForFunction(([el, open]) => el.parentElement.open === open && (!open || el.parentElement.querySelectorAll(":scope > ul > li").length > 0), [branch, was], { timeout: 5000 }).then(() => true, () => false);
      toggled = { was, first, second, connected: await branch.evaluate((el) => el.isConnected) };
    }
    await kbPage.close();
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
    // (One whose steps revealed a continuation, where the devnet has one.)
    let merkle = null;
    for (const c of (await api("/contracts?order=desc&limit=100")).results.slice(10)) {
      const full = await api(`/contracts/${enc(c.contractId)}`);
      const n = (JSON.stringify(full.initialContract).match(/"merkleized_then"/g) || []).length;
      if (n === 0) continue;
      const revealed = c.steps > 0 && (await api(`/contracts/${enc(c.contractId)}/history?limit=100`)).results.some((r) => r.kind === "inputs_applied" && JSON.stringify(r.payload.inputs).includes("continuation_hash"));
      if (!merkle || revealed) merkle = { id: c.contractId, n, revealed };
      if (revealed) break;
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
    // Each revealed continuation links to its contract source (its hash is its source id).
    const sources = await mPage.$$eval("#tree a.source-link", (l) => l.map((a) => a.href));
    const badSources = [];
    for (const href of sources) {
      const res = await fetch(href.replace(BASE, QUERY_URL));
      const body = res.ok ? await res.json() : null;
      if (!body || !href.endsWith("/sources/" + body.sourceId)) badSources.push([href, res.status]);
    }
    check(sources.length === marks.filter((m) => /revealed/.test(m)).length && (sources.length > 0 || !merkle.revealed) && badSources.length === 0, `each of the ${sources.length} revealed continuation(s) links to its source (GET /sources/{hash})`, badSources);
    await mPage.close();
    await checkTransactionPages(context, errors, BASE, stepTx, wd);
    await checkPayoutsPage(context, errors, BASE);
    await checkApiPage(context, errors, BASE);
    await checkContractViews(context, errors, BASE);
    await checkPhone(context, errors, BASE);
    await items.everyPage(context, errors, BASE);
    clicked.add(await items.clickExplorerLink(context, errors, BASE, openId));

    let shotTaken = false;
    if ((await live.page.textContent("#facts")).includes("waiting for its next step")) {
      await docShot(live.page, "explorer-contract.png"); // an open contract: its current position shows
      await docShot(live.page, "explorer-contract-dark.png", { scheme: "dark" });
      shotTaken = true;
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
    if (!shotTaken) {
      await docShot(rbPage, "explorer-contract.png");
      await docShot(rbPage, "explorer-contract-dark.png", { scheme: "dark" });
    }
    await rbPage.close();
    await live.page.close();

    // A rollback seen live on an open contract page: a step the page
    // showed is struck through and flashed when a rollback undoes it,
    // without a reload. Meanwhile (on the first origin) the list's event
    // stream stalls: the header says so, and the stream comes back.
    const [seen] = await Promise.all([watchLiveRollback(context, errors, 180000), checkStall(list, proxy)]);
    check(seen && seen.hit, "an open contract page strikes through a step when a rollback undoes it, without reload", seen);
    const hit = seen.hit;
    log(`     ${hit.contractId}: the step at seq ${hit.step}, undone by the rollback at seq ${hit.rollback}, flashed "${hit.flashed}" (${hit.pages} pages opened, ${hit.rollbacks} rollbacks watched, ${hit.waited} s)`);

    // The contracts page flashed a row a rollback changed (it has been
    // watching all along).
    await list.waitForFunction(() => Number(document.getElementById("contracts").dataset.flashedRollback || 0) > 0, null, { timeout: 30000 });
    check(true, `the contracts page flashed ${await list.evaluate(() => document.getElementById("contracts").dataset.flashedRollback)} row(s) a rollback changed`);

    // A dropped event stream resumes (Last-Event-ID) and says so.
    const reconnectsBefore = await list.evaluate(() => Number(document.documentElement.dataset.reconnects || 0));
    const cutAt = Date.now();
    const cut = proxy.cutEvents();
    await list.waitForFunction((n) => Number(document.documentElement.dataset.reconnects || 0) > n && document.documentElement.dataset.live === "resumed", reconnectsBefore, { timeout: 15000 });
    const bannerText = await list.textContent("#banner");
    check(/Reconnected: live updates resumed after cursor \S+, nothing missed/.test(bannerText), `after ${cut} event stream(s) were cut, the banner says: "${bannerText}"`);
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

    await checkStatusBehind(context, errors, BASE);

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
    // The transaction page asks, for its transaction, for the step it made,
    // the withdrawal and the contracts it created (TX#0 to #3): those it did
    // not make answer 404.
    const txPage = (e) => {
      const m = /\/ui\/transaction\?id=([0-9a-f]{64})/.exec(e.url || "");
      return m && /status of 404/.test(e.text) && new RegExp(`/(transactions/${m[1]}|withdrawals/${m[1]}|contracts/${m[1]}%23[0-3])$`).test(e.resource || "");
    };
    const gone = (e) => /status of 404/.test(e.text) && [...gonePages].some((id) => (e.resource || "").endsWith("/contracts/" + enc(id)));
    // A list row's details (rowinfo.js: GET /contracts/{id}?minSeq=...)
    // asked for a contract that a rollback took away meanwhile: a 404 only
    // while the contract is absent from the API now too.
    const rowGone = [];
    for (const e of errors) {
      const m = /\/contracts\/([^/?]+)\?minSeq=\d+$/.exec(e.resource || "");
      if (!m || !/status of 404/.test(e.text)) continue;
      const res = await fetch(QUERY_URL + "/contracts/" + m[1]);
      if (res.status === 404) rowGone.push(e);
    }
    const real = errors.filter((e) => !cutErrors(e) && !closedRace.includes(e) && !lookups(e) && !txPage(e) && !gone(e) && !rowGone.includes(e));
    const strays = offPort.filter((u) => !clicked.has(u));
    check(clicked.size > 0 && strays.length === 0, `no request of any page left the port but the ${clicked.size} explorer link(s) clicked (${offPort.length} off the port in all)`, strays);
    check(real.length === 0, `no console errors and no request off the query port on the explorer's pages (${errors.filter(cutErrors).length} from the cut connections, ${closedRace.length} /next of a contract closing meanwhile, ${errors.filter(lookups).length} 404s of the search's transaction lookups, ${errors.filter(txPage).length} of the transaction pages' lookups, ${errors.filter(gone).length + rowGone.length} of contracts a rollback took away)`, real);
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
