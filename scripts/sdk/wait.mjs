// node wait.mjs QUERY_URL BLOCKS [TIMEOUT_S]: waits until the service at
// QUERY_URL (its native API) has followed a devnet chain stopped at BLOCKS
// blocks and stored all of it (the node's tip is block BLOCKS, the follower
// is there, the projection has applied every history record, and nothing
// has changed for a while: the history commits within a second), then
// checks that the chain has the activity sdk-check.mjs needs: contracts,
// payouts available and withdrawn, withdrawals. Exits non-zero, saying
// what is missing, otherwise.

const [url, blocksArg, timeoutArg] = process.argv.slice(2);
const blocks = Number(blocksArg);
if (!url || !(blocks > 0)) {
  console.error("usage: node wait.mjs QUERY_URL BLOCKS [TIMEOUT_S]");
  process.exit(2);
}
const timeoutMs = Number(timeoutArg || 90) * 1000;
const STILL_MS = 2000; // unchanged this long: at rest
const started = Date.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function get(path) {
  const res = await fetch(url + path);
  const body = await res.json();
  if (!res.ok) throw new Error(`GET ${path}: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  return body;
}

let last = "no answer yet";
let still = null; // {key, since}
for (;;) {
  if (Date.now() - started > timeoutMs) {
    console.error(`FAIL the service did not come to rest at block ${blocks} within ${timeoutMs / 1000} s; last: ${last}`);
    process.exit(1);
  }
  try {
    const s = await get("/status");
    last = JSON.stringify({ nodeTip: s.nodeTip, followerPoint: s.followerPoint, historySeq: s.historySeq, projection: s.projection });
    const there = s.connected && s.nodeTip.blockNo === blocks && s.followerPoint.hash === s.nodeTip.hash &&
      s.projection.lag === 0 && !s.projection.error;
    const key = there ? `${s.historySeq}/${s.projection.seq}` : null;
    if (key === null) {
      still = null;
    } else if (!still || still.key !== key) {
      still = { key, since: Date.now() };
    } else if (Date.now() - still.since >= STILL_MS) {
      break;
    }
  } catch (e) {
    last = e.message;
  }
  await sleep(200);
}

for (const [what, path] of [
  ["contracts", "/contracts?limit=1"],
  ["available payouts", "/payouts?status=available&limit=1"],
  ["withdrawn payouts", "/payouts?status=withdrawn&limit=1"],
  ["withdrawals", "/withdrawals?limit=1"],
]) {
  const body = await get(path);
  if (!Array.isArray(body.results) || body.results.length === 0) {
    console.error(`FAIL the devnet chain of ${blocks} blocks has no ${what} (GET ${path}); give it more blocks`);
    process.exit(1);
  }
}
const contracts = await get("/contracts?limit=1");
console.log(`the chain is at rest at block ${blocks} after ${((Date.now() - started) / 1000).toFixed(1)} s ` +
  `(${contracts.total} contracts; payouts available and withdrawn, withdrawals: all there)`);
