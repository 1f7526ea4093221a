// The official Marlowe TypeScript SDK (@marlowe.io/runtime-rest-client
// 0.4.0-beta) against the runtime view: node sdk-check.mjs BASE_URL, where
// BASE_URL is the view (http://127.0.0.1:PORT/runtime). run.sh starts a
// devnet service and runs this against it.
//
// It makes a strict client (mkRestClient(BASE_URL, true)) and calls every
// read method a Runtime 1.0.0 answers, over all of the data: healthcheck,
// version; getContracts unfiltered, paged (page.next followed through the
// whole list, both orders) and filtered by tags, party addresses and party
// roles; getContractById for every contract; getTransactionsForContract
// (default range and paged) and getContractTransactionById for every step;
// getNextStepsForContract for every open contract, without parties and with
// them in role and in address form; getPayouts (paged, by status, contract
// ids and role tokens) and getPayoutById for every payout; getWithdrawals
// (plain and paged) and getWithdrawalById for every withdrawal. The answers
// are cross-checked (pages against one big page, filters against the data,
// details against headers). Every list call's page.total (Total-Count) must
// be there and be the length of the whole list. The contract sources: for
// a created contract (its sourceId, from the native API's contract) and for
// a merkleized continuation a step revealed (a member of that closure other
// than the contract itself), getContractSourceById (plain and expanded),
// getContractSourceAdjacency and getContractSourceClosure, every id of the
// closure answering; a hash no step revealed rejects with 404. Builds and
// submissions are not called.
//
// It exits non-zero, naming the method, its request, the HTTP requests it
// made and the error, on any decode error, rejected call, unhandled
// rejection or uncaught exception, and when the data is trivially empty (no
// contracts, steps, payouts of either status, withdrawals or applicable
// inputs). The comparisons need a chain at rest: it fails if the tip moved
// during the check (run.sh stops the devnet's chain at a number of blocks).
//
// The SDK is loaded from SDK_NODE_MODULES (the node_modules directory run.sh
// installs package-lock.json into, outside the repository) when it is set,
// else by the usual resolution.
//
// Bugs of the SDK (0.4.0-beta) that the Marlowe Runtime triggers as well,
// and how the check handles them:
//   - mkRestClient fires a healthcheck in the background and never handles
//     its rejection: against a Runtime that is down, or whose headers fail
//     the decoder, the process gets an unhandled rejection. The handlers
//     below are installed before the client is made, so that it is reported
//     as a failure of the check, not a crash.
//   - healthcheck() decodes every tip header as {blockHeader, slotTimeUTC}:
//     a Runtime (or the view) whose chain has no block yet sends the
//     genesis form {genesisTimeUTC} and the call rejects. run.sh starts the
//     check once the chain has blocks.
//   - getContracts() and getWithdrawals() are typed with an optional
//     request, but in strict mode an absent one fails the request guard
//     ("Expecting Partial<...> but instead got: undefined"). The strict
//     client is called with {}; the no-argument form is called on a
//     non-strict client (mkRestClient(BASE_URL, false)).
//   - getWithdrawals({partyRoles}) builds the URL without its "?"
//     (/withdrawalspartyRole=...), which no Runtime routes: that form is not
//     called.
//   - The getWithdrawals decoder requires links {contract, transactions} on
//     every withdrawal, which a Runtime 1.0.0 does not send (its withdrawal
//     links are {withdrawal}); the view sends them as well.
//   - The list calls read Total-Count into page.total with Number(): where a
//     Runtime sends none, page.total is NaN (the view sends it on every page
//     of every list, as servant-pagination does, and the check fails
//     without it).
//   - getPayoutById drops the payout's fields beyond its own type; the
//     check compares what it keeps.

import dc from "node:diagnostics_channel";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const SDK_VERSION = "0.4.0-beta";
const RUNTIME_VERSION = "1.0.0";
// A page larger than any list of the devnet: the reference listing.
const BIG = 10000;
// How many values of each filter are tried.
const FILTER_SAMPLE = 12;
// The latest time toISOString writes as a plain ISO 8601 year (9999).
const MAX_ISO_MS = 253402300799999n;

const started = Date.now();
let inFlight = "loading the SDK"; // what is running, for the failure message
let httpLog = []; // the HTTP requests of the call in flight

// JSON with BigInts (as the SDK decodes numbers) and fp-ts Options.
function show(v, max = 600) {
  let s;
  try {
    s = JSON.stringify(v, (_, x) => (typeof x === "bigint" ? x.toString() : x));
  } catch {
    s = String(v);
  }
  if (s === undefined) s = String(v);
  return s.length > max ? s.slice(0, max) + "..." : s;
}

function describe(err) {
  if (Array.isArray(err)) return "decode error:\n    " + err.map(String).join("\n    ");
  if (err && err.isAxiosError) {
    const r = err.response;
    return `${err.message}` + (r ? ` (HTTP ${r.status}; body ${show(r.data)})` : "");
  }
  if (err instanceof Error) return err.stack || err.message;
  return show(err);
}

function die(what, err) {
  const lines = [`FAIL ${what}`];
  if (err !== undefined) lines.push("  error: " + describe(err).replace(/\n/g, "\n  "));
  if (httpLog.length > 0) {
    lines.push("  HTTP requests of the call:");
    for (const h of httpLog) lines.push(`    ${h.line} -> ${h.status ?? "no answer"}`);
  }
  console.error(lines.join("\n"));
  process.exit(1);
}

// First of all: a rejection nobody handles (mkRestClient's background
// healthcheck) or an exception thrown outside a call fails the check.
process.on("unhandledRejection", (reason) => die(`unhandled rejection while ${inFlight}`, reason));
process.on("uncaughtException", (err) => die(`uncaught exception while ${inFlight}`, err));

// The HTTP requests the SDK makes (axios on node:http), for the messages.
const pending = new WeakMap();
let open = 0; // requests without an answer or an error yet
dc.subscribe("http.client.request.start", ({ request }) => {
  const range = request.getHeader("range");
  const h = { line: `${request.method} ${request.path}${range ? ` (Range: ${range})` : ""}` };
  pending.set(request, h);
  httpLog.push(h);
  open++;
});
const ended = (request, status) => {
  const h = pending.get(request);
  if (!h || h.done) return;
  h.done = true;
  h.status = status;
  open--;
};
dc.subscribe("http.client.response.finish", ({ request, response }) => ended(request, response.statusCode));
dc.subscribe("http.client.request.error", ({ request, error }) => ended(request, `error ${error.code || error.message}`));

// settled waits until the call in flight has made at least started HTTP
// requests and every one has ended, then a little more for what follows
// from them (a rejection nobody handles) to happen.
async function settled(started = 0) {
  for (let i = 0; (open > 0 || httpLog.length < started) && i < 2000; i++) await new Promise((r) => setTimeout(r, 5));
  await new Promise((r) => setTimeout(r, 20));
}

async function loadSDK() {
  const dir = process.env.SDK_NODE_MODULES;
  if (!dir) return import("@marlowe.io/runtime-rest-client");
  const pkgDir = join(dir, "@marlowe.io", "runtime-rest-client");
  const pkg = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
  if (pkg.version !== SDK_VERSION) die(`${pkgDir} is version ${pkg.version}, not ${SDK_VERSION}`);
  return import(pathToFileURL(join(pkgDir, pkg.exports["."].import)).href);
}

const stats = new Map(); // method -> {calls, items, ms}
function stat(method) {
  if (!stats.has(method)) stats.set(method, { calls: 0, items: 0, ms: 0 });
  return stats.get(method);
}

function check(ok, what, detail) {
  if (!ok) die(what + (detail === undefined ? "" : ": " + show(detail, 2000)));
}

let rest;

// call runs one SDK method and fails the check when it rejects.
async function call(method, request, client = rest) {
  const s = stat(method);
  s.calls++;
  const label = `${method}(${request === undefined ? "" : show(request)})`;
  inFlight = label;
  httpLog = [];
  const t0 = Date.now();
  try {
    const res = request === undefined ? await client[method]() : await client[method](request);
    // Every page of every list carries Total-Count (page.total).
    if (res && typeof res === "object" && res.page !== undefined) {
      check(Number.isInteger(res.page.total) && res.page.total >= 0, `${label}: no Total-Count (page.total ${res.page.total})`);
    }
    return res;
  } catch (err) {
    die(`${label} rejected`, err);
  } finally {
    s.ms += Date.now() - t0;
    inFlight = `between calls (after ${label})`;
  }
}

// callRejecting runs a method that must reject with an HTTP status.
async function callRejecting(method, request, status) {
  const s = stat(method);
  s.calls++;
  const label = `${method}(${show(request)})`;
  inFlight = label;
  httpLog = [];
  const t0 = Date.now();
  let out;
  try {
    out = await rest[method](request);
  } catch (err) {
    s.ms += Date.now() - t0;
    const got = err && err.response && err.response.status;
    if (got !== status) die(`${label} rejected, but not with HTTP ${status}`, err);
    return err;
  }
  die(`${label} resolved (${show(out)}); want a rejection with HTTP ${status}`);
}

// pages follows page.next from a first request to the end of a list.
async function pages(method, request, key) {
  const items = [];
  const totals = new Set();
  let req = request;
  let n = 0;
  for (;;) {
    const res = await call(method, req);
    n++;
    items.push(...res[key]);
    totals.add(res.page.total);
    if (!res.page.next) break;
    check(n < 100000, `${method}: page.next never ends`, request);
    req = { ...request, range: res.page.next };
  }
  stat(method).items += items.length;
  const total = [...totals][0];
  check(totals.size === 1 && total >= items.length, `${method}(${show(request)}): page.total (Total-Count) differs between pages or is short`,
    { totals: [...totals], items: items.length });
  return { items, pages: n, total };
}

function sameList(what, got, want) {
  const seen = new Set();
  for (const id of got) {
    check(!seen.has(id), `${what}: ${id} is listed twice`);
    seen.add(id);
  }
  const missing = want.filter((id) => !seen.has(id));
  check(missing.length === 0, `${what}: ${missing.length} of ${want.length} missing`, missing.slice(0, 5));
  const extra = got.filter((id) => !want.includes(id));
  check(extra.length === 0, `${what}: ${extra.length} not in the reference list`, extra.slice(0, 5));
  check(show(got, Infinity) === show(want, Infinity), `${what}: the order differs from the reference list`);
}

const log = (msg) => console.log(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}`);
const some = (xs, n = FILTER_SAMPLE) => xs.slice(0, n);
const roleKey = (r) => `${r.policyId}.${r.assetName}`;
const unOption = (o) => (o && o._tag === "Some" ? o.value : undefined);

// partiesOf collects the parties a contract (and state) mention.
function partiesOf(v, out = { addresses: new Set(), roles: new Set() }) {
  if (Array.isArray(v)) {
    for (const x of v) partiesOf(x, out);
  } else if (v && typeof v === "object") {
    if (typeof v.address === "string" && Object.keys(v).length === 1) out.addresses.add(v.address);
    if (typeof v.role_token === "string" && Object.keys(v).length === 1) out.roles.add(v.role_token);
    for (const x of Object.values(v)) partiesOf(x, out);
  }
  return out;
}

const partyEqual = (a, b) => show(a) === show(b);

// canon is a value's JSON with every object's keys sorted (BigInts as
// numbers' text): equal values, whatever the order of their keys.
function canon(v) {
  if (typeof v === "bigint") return v.toString();
  if (Array.isArray(v)) return "[" + v.map(canon).join(",") + "]";
  if (v && typeof v === "object") {
    return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canon(v[k])).join(",") + "}";
  }
  return JSON.stringify(v);
}

async function main() {
  const base = process.argv[2];
  if (!base) die("usage: node sdk-check.mjs BASE_URL (the runtime view, http://HOST:PORT/runtime)");
  const { mkRestClient } = await loadSDK();
  inFlight = "mkRestClient's background healthchecks";
  httpLog = [];
  rest = mkRestClient(base, true);
  const loose = mkRestClient(base, false);
  await settled(2);
  log(`SDK ${SDK_VERSION} against ${base}`);

  // Status.
  const health = await call("healthcheck");
  check(health.version === RUNTIME_VERSION, "healthcheck: version", health.version);
  check(typeof health.networkId === "string" && health.networkId !== "", "healthcheck: networkId", health.networkId);
  const tip = health.tips.runtime.blockHeader;
  check((await call("version")) === RUNTIME_VERSION, "version()");
  log(`ok   healthcheck: Runtime ${health.version}, network ${health.networkId}, tip block ${tip.blockNo}`);

  // Contracts: one big page is the reference list.
  const all = await call("getContracts", { range: `contractId;limit ${BIG}` });
  const contracts = all.contracts;
  const ids = contracts.map((c) => c.contractId);
  stat("getContracts").items += ids.length;
  check(ids.length > 0, "getContracts: no contracts (is the devnet running?)");
  check(ids.length < BIG, `getContracts: ${BIG} contracts or more; the check wants fewer`);
  check(all.page.next === undefined, "getContracts: a next page after the whole list", all.page);
  check(all.page.total === ids.length, "getContracts: page.total (Total-Count) is not the number of contracts", all.page);
  const first = await call("getContracts", {});
  sameList("getContracts({}): the first page", first.contracts.map((c) => c.contractId), ids.slice(0, 100));
  const firstLoose = await call("getContracts", undefined, loose);
  sameList("getContracts() (non-strict client)", firstLoose.contracts.map((c) => c.contractId), ids.slice(0, 100));
  if (first.page.next) {
    const rest100 = await pages("getContracts", { range: first.page.next }, "contracts");
    sameList("getContracts from the first page's page.next", rest100.items.map((c) => c.contractId), ids.slice(100));
  }
  const desc = await pages("getContracts", { range: "contractId;limit 7" }, "contracts");
  sameList(`getContracts paged by 7 (${desc.pages} pages)`, desc.items.map((c) => c.contractId), ids);
  check(desc.total === ids.length, "getContracts paged by 7: page.total is not the number of contracts", desc.total);
  // A full last page: its page.next gives an empty page, and the end.
  const whole = await pages("getContracts", { range: `contractId;limit ${ids.length}` }, "contracts");
  check(whole.pages === 2, `getContracts with limit ${ids.length}: ${whole.pages} pages, want the list and an empty one`);
  sameList(`getContracts with limit ${ids.length}`, whole.items.map((c) => c.contractId), ids);
  const asc = await pages("getContracts", { range: "contractId;limit 9;order asc" }, "contracts");
  sameList(`getContracts paged by 9, ascending (${asc.pages} pages)`, asc.items.map((c) => c.contractId), [...ids].reverse());
  log(`ok   getContracts: ${ids.length} contracts; paged by 7 in ${desc.pages} pages, by 9 ascending in ${asc.pages}, all equal`);

  // Tags: exactly the contracts that have them.
  const tags = [...new Set(contracts.flatMap((c) => Object.keys(c.tags)))];
  check(tags.length > 0, "no contract has a tag");
  for (const tag of some(tags)) {
    const got = await pages("getContracts", { tags: [tag], range: "contractId;limit 25" }, "contracts");
    sameList(`getContracts tag ${tag}`, got.items.map((c) => c.contractId),
      contracts.filter((c) => tag in c.tags).map((c) => c.contractId));
    check(got.total === got.items.length, `getContracts tag ${tag}: page.total is not the number of contracts listed`, got.total);
  }
  if (tags.length >= 2) {
    const two = tags.slice(-2);
    const got = await pages("getContracts", { tags: two }, "contracts");
    sameList(`getContracts tags ${two}`, got.items.map((c) => c.contractId),
      contracts.filter((c) => two.some((t) => t in c.tags)).map((c) => c.contractId));
  }
  log(`ok   getContracts by tag: ${Math.min(tags.length, FILTER_SAMPLE)} of ${tags.length} tags, and two at once`);

  // Every contract's details.
  const details = new Map();
  for (const c of contracts) {
    const d = await call("getContractById", { contractId: c.contractId });
    stat("getContractById").items++;
    check(d.contractId === c.contractId, "getContractById: another contract", [c.contractId, d.contractId]);
    check(d.roleTokenMintingPolicyId === c.roleTokenMintingPolicyId && show(d.tags) === show(c.tags),
      `getContractById ${c.contractId}: policy or tags differ from the list's`, [c, d]);
    details.set(c.contractId, d);
  }
  const open = contracts.filter((c) => details.get(c.contractId).currentContract !== undefined);
  log(`ok   getContractById: ${details.size} contracts (${open.length} open)`);

  // Parties, from the contracts and states as created: a filter gives a
  // subset of the list that holds at least those.
  const byAddress = new Map();
  const byRole = new Map();
  for (const c of contracts) {
    const d = details.get(c.contractId);
    const p = partiesOf([d.initialContract, d.initialState ?? null]);
    for (const a of p.addresses) byAddress.set(a, [...(byAddress.get(a) ?? []), c.contractId]);
    for (const r of p.roles) {
      const k = roleKey({ policyId: c.roleTokenMintingPolicyId, assetName: r });
      byRole.set(k, [...(byRole.get(k) ?? []), c.contractId]);
    }
  }
  check(byAddress.size > 0 && byRole.size > 0, "the contracts have no address or no role parties",
    { addresses: byAddress.size, roles: byRole.size });
  const partyFiltered = async (what, request, want) => {
    const got = (await pages("getContracts", request, "contracts")).items.map((c) => c.contractId);
    const gotSet = new Set(got);
    check(gotSet.size === got.length, `getContracts ${what}: a contract is listed twice`);
    const missing = want.filter((id) => !gotSet.has(id));
    check(missing.length === 0, `getContracts ${what}: misses contracts that name the party`, missing.slice(0, 5));
    sameList(`getContracts ${what}: a sublist of the contracts`, got, ids.filter((id) => gotSet.has(id)));
    return got;
  };
  for (const [addr, want] of some([...byAddress])) {
    await partyFiltered(`partyAddress ${addr}`, { partyAddresses: [addr], range: "contractId;limit 25" }, want);
  }
  const roleOf = (k) => ({ policyId: k.slice(0, k.indexOf(".")), assetName: k.slice(k.indexOf(".") + 1) });
  for (const [k, want] of some([...byRole])) {
    await partyFiltered(`partyRole ${k}`, { partyRoles: [roleOf(k)], range: "contractId;limit 25" }, want);
  }
  {
    const [addr, wantA] = [...byAddress][0];
    const [k, wantR] = [...byRole][0];
    await partyFiltered(`partyAddress ${addr} or partyRole ${k}`,
      { partyAddresses: [addr], partyRoles: [roleOf(k)] }, [...new Set([...wantA, ...wantR])]);
  }
  log(`ok   getContracts by party: ${Math.min(byAddress.size, FILTER_SAMPLE)} of ${byAddress.size} addresses, ` +
    `${Math.min(byRole.size, FILTER_SAMPLE)} of ${byRole.size} roles, and both at once`);

  // Every contract's steps: the default range, pages of 2, every step.
  let steps = 0;
  for (const c of contracts) {
    const list = await call("getTransactionsForContract", { contractId: c.contractId });
    stat("getTransactionsForContract").items += list.transactions.length;
    const txIds = list.transactions.map((t) => t.transactionId);
    check(txIds.length < 100, `getTransactionsForContract ${c.contractId}: 100 steps or more`);
    check(list.page.next === undefined, `getTransactionsForContract ${c.contractId}: a next page after a short one`, list.page);
    const paged = await pages("getTransactionsForContract", { contractId: c.contractId, range: "transactionId;limit 2" }, "transactions");
    sameList(`getTransactionsForContract ${c.contractId} paged by 2`, paged.items.map((t) => t.transactionId), txIds);
    check(paged.total === txIds.length && list.page.total === txIds.length,
      `getTransactionsForContract ${c.contractId}: page.total is not the number of steps`, [list.page.total, paged.total]);
    for (const t of list.transactions) {
      check(t.contractId === c.contractId, "getTransactionsForContract: a step of another contract", t);
      const d = await call("getContractTransactionById", { contractId: c.contractId, txId: t.transactionId });
      stat("getContractTransactionById").items++;
      check(d.transactionId === t.transactionId && d.contractId === c.contractId,
        "getContractTransactionById: another step", [t.transactionId, d.transactionId]);
      check(show(unOption(d.outputUtxo)) === show(unOption(t.utxo)),
        `getContractTransactionById ${t.transactionId}: outputUtxo is not the list's utxo`, [d.outputUtxo, t.utxo]);
      steps++;
    }
  }
  check(steps > 0, "no contract has a step");
  log(`ok   getTransactionsForContract and getContractTransactionById: ${steps} steps of ${contracts.length} contracts`);

  // Next steps of every open contract, in its current interval: from its
  // state's minTime to just before the timeout of the When it waits in
  // (only the minTime when that timeout has passed, or when it waits in
  // none: an interval that contains a timeout is ambiguous).
  const applicable = { deposits: 0, choices: 0, notify: 0, canReduce: 0, late: 0, lateNotify: 0 };
  const filtered = { role: 0, address: 0, roleKept: 0, addressKept: 0 };
  for (const c of open) {
    const d = details.get(c.contractId);
    if (!d.state) continue;
    const start = d.state.minTime;
    let end = start;
    const cc = d.currentContract;
    if (cc && typeof cc === "object" && "when" in cc && cc.timeout > start) end = cc.timeout - 1n;
    if (end > MAX_ISO_MS) end = MAX_ISO_MS;
    const req = { contractId: c.contractId, validityStart: start, validityEnd: end };
    const next = await call("getNextStepsForContract", req);
    stat("getNextStepsForContract").items++;
    const ai = next.applicable_inputs;
    applicable.deposits += ai.deposits.length;
    applicable.choices += ai.choices.length;
    applicable.notify += unOption(ai.notify) ? 1 : 0;
    applicable.canReduce += next.can_reduce ? 1 : 0;
    // And at the last moment before the timeout, where observations of
    // the interval's start (a notification's "after the drop time") can
    // turn true.
    if (end > start) {
      const late = await call("getNextStepsForContract", { ...req, validityStart: end });
      stat("getNextStepsForContract").items++;
      applicable.late += late.applicable_inputs.deposits.length + late.applicable_inputs.choices.length;
      applicable.lateNotify += unOption(late.applicable_inputs.notify) ? 1 : 0;
    }
    // With parties: those of the applicable inputs (and one of the
    // contract's that has none), one role and one address.
    const inputParties = [...ai.deposits.map((x) => x.party), ...ai.choices.map((x) => x.for_choice.choice_owner)];
    const p = partiesOf([d.initialContract]);
    const candidates = [
      ...inputParties,
      ...[...p.roles].map((r) => ({ role_token: r })),
      ...[...p.addresses].map((a) => ({ address: a })),
    ];
    for (const form of ["role_token", "address"]) {
      const party = candidates.find((x) => form in x);
      if (!party) continue;
      const got = await call("getNextStepsForContract", { ...req, parties: [party] });
      stat("getNextStepsForContract").items++;
      const want = {
        can_reduce: next.can_reduce,
        deposits: ai.deposits.filter((x) => partyEqual(x.party, party)),
        choices: ai.choices.filter((x) => partyEqual(x.for_choice.choice_owner, party)),
        notify: unOption(ai.notify),
      };
      const have = {
        can_reduce: got.can_reduce,
        deposits: got.applicable_inputs.deposits,
        choices: got.applicable_inputs.choices,
        notify: unOption(got.applicable_inputs.notify),
      };
      check(show(have, Infinity) === show(want, Infinity),
        `getNextStepsForContract ${show(req)} with parties [${show(party)}]: not the unfiltered answer's inputs of the party`, { have, want });
      const kind = form === "role_token" ? "role" : "address";
      filtered[kind]++;
      if (want.deposits.length + want.choices.length > 0) filtered[kind + "Kept"]++;
    }
  }
  const found = applicable.deposits + applicable.choices + applicable.notify + applicable.late + applicable.lateNotify;
  check(found > 0, "getNextStepsForContract: no applicable input in any open contract", applicable);
  check(filtered.role > 0 && filtered.address > 0, "getNextStepsForContract: not called with parties of both forms", filtered);
  log(`ok   getNextStepsForContract: ${open.length} open contracts, ${applicable.deposits} deposits, ` +
    `${applicable.choices} choices, ${applicable.notify} notifies applicable, ${applicable.canReduce} can reduce; ` +
    `just before the timeout ${applicable.late} deposits and choices, ${applicable.lateNotify} notifies; ` +
    `with a role party ${filtered.role} times (${filtered.roleKept} keeping inputs), ` +
    `with an address party ${filtered.address} times (${filtered.addressKept} keeping inputs)`);

  // Payouts.
  const none = { contractIds: [], roleTokens: [] };
  const bigPayouts = await call("getPayouts", { ...none, range: `payoutId;limit ${BIG}` });
  const payouts = bigPayouts.payouts;
  const payoutIds = payouts.map((p) => p.payoutId);
  stat("getPayouts").items += payouts.length;
  check(payouts.length > 0 && payouts.length < BIG, `getPayouts: ${payouts.length} payouts`);
  const firstPayouts = await call("getPayouts", none);
  sameList("getPayouts: the first page", firstPayouts.payouts.map((p) => p.payoutId), payoutIds.slice(0, 100));
  const pagedPayouts = await pages("getPayouts", { ...none, range: "payoutId;limit 5" }, "payouts");
  sameList(`getPayouts paged by 5 (${pagedPayouts.pages} pages)`, pagedPayouts.items.map((p) => p.payoutId), payoutIds);
  check(pagedPayouts.total === payoutIds.length, "getPayouts: page.total is not the number of payouts", pagedPayouts.total);
  const byStatus = {};
  for (const status of ["available", "withdrawn"]) {
    const got = await pages("getPayouts", { ...none, status, range: "payoutId;limit 20" }, "payouts");
    const want = payouts.filter((p) => p.status === status).map((p) => p.payoutId);
    check(want.length > 0, `getPayouts: no ${status} payout`);
    sameList(`getPayouts status ${status}`, got.items.map((p) => p.payoutId), want);
    check(got.total === want.length, `getPayouts status ${status}: page.total is not the number of payouts`, got.total);
    byStatus[status] = want.length;
  }
  const payoutContracts = [...new Set(payouts.map((p) => p.contractId))];
  for (const cid of some(payoutContracts)) {
    const got = await pages("getPayouts", { contractIds: [cid], roleTokens: [] }, "payouts");
    sameList(`getPayouts contractId ${cid}`, got.items.map((p) => p.payoutId),
      payouts.filter((p) => p.contractId === cid).map((p) => p.payoutId));
  }
  if (payoutContracts.length >= 2) {
    const two = payoutContracts.slice(-2);
    const got = await pages("getPayouts", { contractIds: two, roleTokens: [], status: "withdrawn" }, "payouts");
    sameList(`getPayouts contractIds ${two} withdrawn`, got.items.map((p) => p.payoutId),
      payouts.filter((p) => two.includes(p.contractId) && p.status === "withdrawn").map((p) => p.payoutId));
  }
  const roles = [...new Map(payouts.map((p) => [roleKey(p.role), p.role])).values()];
  for (const role of some(roles)) {
    const got = await pages("getPayouts", { contractIds: [], roleTokens: [role] }, "payouts");
    sameList(`getPayouts roleToken ${roleKey(role)}`, got.items.map((p) => p.payoutId),
      payouts.filter((p) => roleKey(p.role) === roleKey(role)).map((p) => p.payoutId));
  }
  for (const p of payouts) {
    const d = await call("getPayoutById", { payoutId: p.payoutId });
    stat("getPayoutById").items++;
    check(d.payoutId === p.payoutId && d.contractId === p.contractId && d.status === p.status &&
      roleKey(d.role) === roleKey(p.role) && d.withdrawalId === unOption(p.withdrawalId),
    `getPayoutById ${p.payoutId}: differs from the list's`, [p, d]);
    check(typeof d.payoutValidatorAddress === "string" && d.assets.lovelace >= 0n,
      `getPayoutById ${p.payoutId}: address or assets`, d);
  }
  log(`ok   getPayouts and getPayoutById: ${payouts.length} payouts (${byStatus.available} available, ` +
    `${byStatus.withdrawn} withdrawn) of ${payoutContracts.length} contracts, ${roles.length} roles`);

  // Withdrawals.
  const bigW = await call("getWithdrawals", { range: `withdrawalId;limit ${BIG}` });
  const withdrawals = bigW.withdrawals;
  const wIds = withdrawals.map((w) => w.withdrawalId);
  stat("getWithdrawals").items += wIds.length;
  check(wIds.length > 0 && wIds.length < BIG, `getWithdrawals: ${wIds.length} withdrawals`);
  const firstW = await call("getWithdrawals", {});
  sameList("getWithdrawals({}): the first page", firstW.withdrawals.map((w) => w.withdrawalId), wIds.slice(0, 100));
  const firstWLoose = await call("getWithdrawals", undefined, loose);
  sameList("getWithdrawals() (non-strict client)", firstWLoose.withdrawals.map((w) => w.withdrawalId), wIds.slice(0, 100));
  const pagedW = await pages("getWithdrawals", { range: "withdrawalId;limit 3" }, "withdrawals");
  sameList(`getWithdrawals paged by 3 (${pagedW.pages} pages)`, pagedW.items.map((w) => w.withdrawalId), wIds);
  check(pagedW.total === wIds.length, "getWithdrawals: page.total is not the number of withdrawals", pagedW.total);
  const withdrawn = new Map(payouts.filter((p) => p.status === "withdrawn").map((p) => [p.payoutId, unOption(p.withdrawalId)]));
  let withdrawnPayouts = 0;
  for (const id of wIds) {
    const d = await call("getWithdrawalById", { withdrawalId: id });
    stat("getWithdrawalById").items++;
    check(d.withdrawalId === id && d.payouts.length > 0, `getWithdrawalById ${id}: another withdrawal or no payouts`, d);
    for (const p of d.payouts) {
      check(p.status === "withdrawn" && withdrawn.get(p.payoutId) === id,
        `getWithdrawalById ${id}: payout ${p.payoutId} is not a withdrawn payout of it in getPayouts`, p);
      withdrawnPayouts++;
    }
  }
  check(withdrawnPayouts === withdrawn.size, "the withdrawals' payouts are not the withdrawn payouts",
    { inWithdrawals: withdrawnPayouts, withdrawn: withdrawn.size });
  log(`ok   getWithdrawals and getWithdrawalById: ${wIds.length} withdrawals of ${withdrawnPayouts} payouts`);

  await checkSources(base, contracts, details);

  // The chain must not have moved: the comparisons assumed it still.
  const after = await call("healthcheck");
  check(show(after.tips.runtime.blockHeader) === show(tip),
    "the chain moved during the check; the comparisons need it at rest (run.sh stops the devnet's chain)",
    { before: tip, after: after.tips.runtime.blockHeader });
  inFlight = "finishing";
  await settled();

  let calls = 0;
  console.log("\ncalls per method (items seen, time in calls):");
  for (const [m, s] of [...stats].sort()) {
    calls += s.calls;
    console.log(`  ${m.padEnd(28)} ${String(s.calls).padStart(6)} calls ${String(s.items).padStart(6)} items ${String(s.ms).padStart(7)} ms`);
  }
  log(`SDK check passed: ${calls} calls`);
}

// checkSources calls the source methods on created contracts' sources
// and on a continuation a step revealed.
async function checkSources(base, contracts, details) {
  const native = base.replace(/\/runtime\/?$/, "");
  let created = 0;
  let continuation;
  for (const c of contracts) {
    inFlight = `the native API's contract ${c.contractId}`;
    const r = await fetch(`${native}/contracts/${encodeURIComponent(c.contractId)}`);
    check(r.ok, `GET ${native}/contracts/${c.contractId}: ${r.status}`);
    const { sourceId } = await r.json();
    check(typeof sourceId === "string" && /^[0-9a-f]{64}$/.test(sourceId), `contract ${c.contractId}: sourceId`, sourceId);
    const src = await call("getContractSourceById", { contractSourceId: sourceId });
    stat("getContractSourceById").items++;
    check(canon(src) === canon(details.get(c.contractId).initialContract),
      `getContractSourceById ${sourceId}: not the initial contract of ${c.contractId}`);
    const adjacency = await call("getContractSourceAdjacency", { contractSourceId: sourceId });
    const closure = await call("getContractSourceClosure", { contractSourceId: sourceId });
    check(closure.results.includes(sourceId), `getContractSourceClosure ${sourceId}: without the source itself`, closure);
    created++;
    const revealed = closure.results.find((h) => h !== sourceId && adjacency.results.includes(h));
    if (revealed && !continuation) continuation = { of: sourceId, id: revealed, closure: closure.results };
    if (created >= FILTER_SAMPLE && continuation) break;
  }
  check(continuation !== undefined, `no created contract's source references a continuation a step revealed (of ${created})`);
  const c = continuation;
  const cont = await call("getContractSourceById", { contractSourceId: c.id });
  const expanded = await call("getContractSourceById", { contractSourceId: c.of, expand: true });
  check(!show(expanded, Infinity).includes(c.id), `getContractSourceById ${c.of} expanded still holds the revealed ${c.id}`);
  await call("getContractSourceAdjacency", { contractSourceId: c.id });
  const sub = await call("getContractSourceClosure", { contractSourceId: c.id });
  check(sub.results.includes(c.id) && sub.results.every((h) => c.closure.includes(h)),
    `getContractSourceClosure ${c.id}: not within the closure of ${c.of}`, sub);
  for (const h of c.closure) await call("getContractSourceById", { contractSourceId: h });
  check(cont !== undefined, "the continuation's source");
  const err = await callRejecting("getContractSourceById", { contractSourceId: "00".repeat(32) }, 404);
  log(`ok   contract sources: ${created} created contracts' sources with adjacency and closure; the continuation ${c.id} ` +
    `revealed in ${c.of}'s closure (${c.closure.length} sources), expanded; a hash never revealed is ${err.response.status}`);
}

main().then(
  () => process.exit(0),
  (err) => die(`uncaught error while ${inFlight}`, err),
);
