// End-to-end test of the service from headless Chromium: a page of an
// allowed origin reads the query API cross-origin (with its exposed
// headers), pages the runtime view with Range as the Marlowe TS SDK does,
// receives server-sent events and WebSocket frames; a page of a
// refused origin is blocked on all three. run.sh starts the service and
// runs this with the environment below; it prints one line per check and
// exits non-zero on the first failure.
//
//   QUERY_URL, WS_URL        the service's query API and WebSocket
//   ALLOWED_PORT, REFUSED_PORT  where the test page is served (127.0.0.1):
//                            the service allows the first origin only
//   CHROMIUM, USER_DATA_DIR  the browser and a fresh profile directory
//   PLAYWRIGHT_CORE          the installed playwright-core package

"use strict";

// The API paths the allowed page fetches; each must answer 2xx with JSON
// and the X-Node-Tip header readable (native paths X-Marlowe-Seq too,
// /runtime ones X-Runtime-Version, and Content-Range on a 206).
const API_PATHS = [
  "/status",
  "/contracts?limit=5",
  "/contracts?status=open&limit=2",
  "/payouts?limit=2",
  "/withdrawals?limit=2",
  "/runtime/contracts",
];

const http = require("node:http");
const fs = require("node:fs");
const path = require("node:path");
const { chromium } = require(process.env.PLAYWRIGHT_CORE || "playwright-core");

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(name + " is not set (run scripts/browser/run.sh)");
  return v;
};
const QUERY_URL = env("QUERY_URL");
const WS_URL = env("WS_URL");
const ALLOWED_PORT = Number(env("ALLOWED_PORT"));
const REFUSED_PORT = Number(env("REFUSED_PORT"));
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const USER_DATA_DIR = env("USER_DATA_DIR");
const WAIT_MS = 20000;
// The runtime view is paged from the page in PAGES pages of PAGE_SIZE.
const PAGE_SIZE = 2;
const PAGES = 3;

const started = Date.now();
const log = (msg) => console.log(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}`);
function check(ok, what, detail) {
  if (!ok) throw new Error(what + (detail === undefined ? "" : ": " + JSON.stringify(detail)));
  log("ok   " + what);
}

// waitForContracts polls the API until the devnet has produced contracts.
async function waitForContracts() {
  const deadline = Date.now() + 60000;
  let last = "";
  while (Date.now() < deadline) {
    try {
      const res = await fetch(QUERY_URL + "/contracts?limit=1");
      const body = await res.json();
      if (res.ok && body.results && body.results.length > 0) return body.results[0].contractId;
      last = res.status + " " + JSON.stringify(body).slice(0, 200);
    } catch (e) {
      last = e.message;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error("no contracts after 60 s: " + last);
}

// waitForRuntimeContracts polls the runtime view until it lists n
// contracts (its Total-Count).
async function waitForRuntimeContracts(n) {
  const deadline = Date.now() + 60000;
  let last = "";
  while (Date.now() < deadline) {
    try {
      const res = await fetch(QUERY_URL + "/runtime/contracts", { headers: { Range: "contractId;limit 1" } });
      last = res.status + " Total-Count " + res.headers.get("Total-Count");
      if (res.status === 206 && Number(res.headers.get("Total-Count")) >= n) return;
    } catch (e) {
      last = e.message;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`the runtime view has not ${n} contracts after 60 s: ${last}`);
}

// serve starts the static server of the test page on a port.
function serve(port) {
  const page = fs.readFileSync(path.join(__dirname, "page.html"));
  const srv = http.createServer((req, res) => {
    if (req.url === "/" || req.url === "/index.html") {
      res.writeHead(200, { "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store" });
      res.end(page);
      return;
    }
    res.writeHead(404, { "Content-Type": "text/plain" });
    res.end("not found");
  });
  return new Promise((resolve, reject) => {
    srv.once("error", reject);
    srv.listen(port, "127.0.0.1", () => resolve(srv));
  });
}

// openPage opens the test page of an origin and records its console errors.
async function openPage(context, origin) {
  const page = await context.newPage();
  const errors = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push("uncaught: " + e.message));
  const res = await page.goto(origin + "/", { waitUntil: "load" });
  if (!res || res.status() !== 200) throw new Error("the test page did not load from " + origin);
  return { page, errors };
}

async function main() {
  const contractId = await waitForContracts();
  log(`ok   the service has contracts (${contractId})`);
  const servers = [await serve(ALLOWED_PORT), await serve(REFUSED_PORT)];
  const allowedOrigin = `http://127.0.0.1:${ALLOWED_PORT}`;
  const refusedOrigin = `http://127.0.0.1:${REFUSED_PORT}`;
  const context = await chromium.launchPersistentContext(USER_DATA_DIR, {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  try {
    const cfg = { query: QUERY_URL, ws: WS_URL, paths: API_PATHS, waitMs: WAIT_MS };

    // An allowed origin: everything works, and no console error.
    const a = await openPage(context, allowedOrigin);
    const got = await a.page.evaluate((c) => window.allowedChecks(c), cfg);
    for (const f of got.fetched) {
      check(f.ok && f.nodeTip && f.hidden === null && f.keys.length > 0,
        `GET ${f.path} from ${allowedOrigin}: ${f.status}, X-Node-Tip ${f.nodeTip} readable, X-Content-Type-Options not`, f);
    }
    const native = got.fetched.filter((f) => !f.path.startsWith("/runtime"));
    check(native.every((f) => Number(f.seq) > 0), "X-Marlowe-Seq readable on the native API", native.map((f) => f.seq));
    for (const f of got.fetched.filter((f) => f.path.startsWith("/runtime"))) {
      check(f.runtimeVersion && (f.status !== 206 || f.contentRange),
        `GET ${f.path}: X-Runtime-Version ${f.runtimeVersion}, Content-Range ${f.contentRange} readable`, f);
    }
    // Paging the runtime view from the page as the SDK does it: a Range
    // request header (so a preflight), Next-Range, Accept-Ranges and
    // Total-Count readable, the next page where the last one ended.
    await waitForRuntimeContracts(PAGES * PAGE_SIZE + 1);
    const paged = await a.page.evaluate(async (c) => {
      const out = [];
      let range = `contractId;limit ${c.size}`;
      for (let i = 0; i < c.pages && range; i++) {
        const res = await fetch(c.query + "/runtime/contracts", {
          headers: { Accept: "application/json", "Content-Type": "application/json", Range: range },
        });
        const body = await res.json();
        out.push({
          status: res.status, ids: body.results.map((r) => r.resource.contractId),
          nextRange: res.headers.get("Next-Range"), acceptRanges: res.headers.get("Accept-Ranges"),
          total: res.headers.get("Total-Count"), runtimeTip: res.headers.get("X-Runtime-Tip"),
        });
        range = res.headers.get("Next-Range");
      }
      return out;
    }, { query: QUERY_URL, size: PAGE_SIZE, pages: PAGES });
    check(paged.length === PAGES && paged.every((p) => p.status === 206 && p.ids.length === PAGE_SIZE && p.nextRange &&
      p.acceptRanges === "contractId" && Number(p.total) > PAGES * PAGE_SIZE && JSON.parse(p.runtimeTip).blockHeader),
    `/runtime/contracts paged with Range from ${allowedOrigin}: ${PAGES} pages of ${PAGE_SIZE}, Next-Range, Accept-Ranges, ` +
      `Total-Count and X-Runtime-Tip readable`, paged);
    check(new Set(paged.flatMap((p) => p.ids)).size === PAGES * PAGE_SIZE, "the Range pages do not overlap", paged);
    check(got.event && got.event.id && got.event.record && got.event.record.seq >= 1,
      `EventSource on /events: a record (seq ${got.event.record.seq}, id ${got.event.id})`, got.event);
    check(got.batch.records > 0 && got.batch.frames[0] === "subscribed",
      `WebSocket: ${got.batch.frames.join(", ")} with ${got.batch.records} records from seq ${got.batch.firstSeq}`, got.batch);
    check(a.errors.length === 0, "no console error on the allowed page", a.errors);

    // A refused origin: the browser blocks every way in.
    const r = await openPage(context, refusedOrigin);
    const refused = await r.page.evaluate((c) => window.refusedChecks(c), cfg);
    for (const [what, outcome] of Object.entries(refused)) {
      check(outcome.startsWith("blocked: "), `${what} from ${refusedOrigin} is blocked (${outcome})`, outcome);
    }
    // Only the deliberate refusals may show up in its console: CORS
    // blocks of the query API and the WebSocket's 403.
    const apiHosts = [new URL(QUERY_URL).host, new URL(WS_URL).host];
    const deliberate = (text) => apiHosts.some((h) => text.includes(h)) &&
      (/blocked by CORS policy/.test(text) || /WebSocket connection to .* failed/.test(text));
    const blocked = (text) => /^Failed to load resource: net::ERR_FAILED$/.test(text);
    const others = r.errors.filter((t) => !deliberate(t) && !blocked(t));
    check(others.length === 0, `the refused page's console holds only the refusals (${r.errors.length} of them)`, others);
    check(r.errors.some((t) => /blocked by CORS policy/.test(t)), "the browser reported the CORS refusal", r.errors);
  } finally {
    await context.close();
    for (const s of servers) s.close();
  }
}

main().then(
  () => log("browser test passed"),
  (e) => {
    console.error("FAIL " + e.message);
    process.exit(1);
  },
);
