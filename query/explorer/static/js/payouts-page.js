// The payouts page: the payouts of GET /payouts (available by default),
// by role token, roles currency or contract, each with its withdrawal
// once withdrawn; kept current by the browser's one event stream.

import { ApiError, get, pageURL } from "./api.js";
import { assets, count, roleName, short, shortContractId, slotTime } from "./format.js";
import { $, ago, banner, boot, chrome, copyable, extLink, fill, follow, h, showTip, site, tickRelative } from "./ui.js";

const FILTERS = ["status", "roleToken", "roleCurrency", "contractId"];
const LIMIT = 25;
const S = { filters: { status: "available" }, cursor: "", cursors: [], page: 1, shownSeq: null, live: null, busy: false, again: false, gen: 0, next: "" };

const blockTime = (b) => (b ? slotTime(site.network, b.slot) : null);
const when = (b) => (b ? ago(blockTime(b), `block ${count(b.blockNo)}, slot ${count(b.slot)}`) : "–");

function readLocation() {
  const q = new URLSearchParams(location.search);
  S.filters = {};
  for (const k of FILTERS) if (q.has(k)) S.filters[k] = q.get(k);
  if (!q.has("status")) S.filters.status = "available";
  S.cursor = q.get("cursor") || "";
  S.page = S.cursor ? Math.max(2, Number(q.get("page")) || 2) : 1;
  const form = $("filters");
  for (const k of FILTERS) form.elements[k].value = S.filters[k] ?? "";
}

function writeLocation() {
  const params = {};
  for (const k of FILTERS) if (S.filters[k] || (k === "status" && S.filters.status === "")) params[k] = S.filters[k];
  if (params.status === "available") delete params.status;
  if (S.filters.status === "") params.status = "";
  if (S.cursor) Object.assign(params, { cursor: S.cursor, page: S.page });
  const u = new URL(pageURL("ui/payouts", params));
  if (S.filters.status === "") u.searchParams.set("status", "");
  history.pushState(null, "", u);
}

// contractsOf: the contracts of a roles currency (at most 100: a currency
// is most often one contract's).
async function contractsOf(currency) {
  const page = await get("contracts", { roleCurrency: currency, limit: 100 });
  return { ids: page.results.map((c) => c.contractId), more: Boolean(page.cursor) };
}

async function refresh() {
  if (S.busy) {
    S.again = true;
    return;
  }
  S.busy = true;
  const gen = S.gen;
  try {
    const f = S.filters;
    const params = { status: f.status || undefined, roleToken: f.roleToken || undefined, contractId: f.contractId ? [f.contractId] : undefined, limit: LIMIT, cursor: S.cursor };
    let note = "";
    if (f.roleCurrency) {
      const { ids, more } = await contractsOf(f.roleCurrency);
      if (!ids.length) {
        render({ results: [], seq: null }, "No contract has this roles currency.");
        return;
      }
      params.contractId = [...(params.contractId || []), ...ids];
      note = `the payouts of the ${ids.length} contract${ids.length === 1 ? "" : "s"} of this roles currency${more ? " (the first 100)" : ""}`;
    }
    const page = await get("payouts", params);
    if (gen !== S.gen) {
      S.again = true;
      return;
    }
    render(page, note);
    S.shownSeq = page.seq;
    if (page.block) showTip({ ...page.block, seq: page.seq });
    S.live.loaded();
  } catch (e) {
    if (e instanceof ApiError && e.status === 400) {
      fill($("summary"), h("span", { class: "error" }, `The filters are not valid: ${e.message}`));
      fill($("payouts").tBodies[0]);
    } else banner(`The query API did not answer: ${e.message}`, "bad", { timeout: 6000 });
  } finally {
    S.busy = false;
    if (S.again) {
      S.again = false;
      setTimeout(refresh, 250);
    }
  }
}

const STATUS = { available: "available", withdrawn: "withdrawn", paid: "paid to the address" };

function render(page, note) {
  const tbody = $("payouts").tBodies[0];
  $("payouts").dataset.query = new URLSearchParams({ ...S.filters, cursor: S.cursor }).toString();
  $("payouts").dataset.seq = String(page.seq ?? "");
  S.next = page.cursor || "";
  fill(tbody, page.results.map((p) => h("tr", { dataset: { payout: p.payoutId, status: p.status, contract: p.contractId, seq: String(p.seq) } },
    h("td", { class: "mono", dataset: { label: "Payout" } }, copyable(p.payoutId, shortContractId(p.payoutId))),
    h("td", { dataset: { label: "Contract" } }, h("a", { href: pageURL("ui/contract", { id: p.contractId }), class: "mono", title: p.contractId }, shortContractId(p.contractId))),
    h("td", { dataset: { label: "To" } }, p.role !== undefined && p.role !== null
      ? [h("strong", {}, roleName(p.role)), " ", h("a", { class: "small", href: pageURL("ui/payouts", { roleToken: `${p.roleTokenMintingPolicyId}.${p.role}`, status: S.filters.status }), title: "Payouts of this role token" }, "role")]
      : p.address ? [short(p.address, 12, 6), extLink("address", p.address)] : "?"),
    h("td", { class: "num", dataset: { label: "Assets" } }, assets(p.assets)),
    h("td", { dataset: { label: "Paid" } }, when(p.block), " by ", h("a", { href: pageURL("ui/transaction", { id: p.transactionId }), class: "mono", title: p.transactionId }, short(p.transactionId, 6, 4))),
    h("td", { dataset: { label: "Status" } }, h("span", { class: "badge " + (p.status === "available" ? "open" : "closed") }, STATUS[p.status] || p.status)),
    h("td", { dataset: { label: "Withdrawal" } }, p.withdrawal
      ? [h("a", { href: pageURL("ui/transaction", { id: p.withdrawal.withdrawalId }), class: "mono", title: p.withdrawal.withdrawalId, dataset: { withdrawal: p.withdrawal.withdrawalId } }, short(p.withdrawal.withdrawalId, 6, 4)), " ", when(p.withdrawal.block)]
      : h("span", { class: "muted" }, p.status === "available" ? "not yet" : "–")))));
  if (!page.results.length) fill(tbody, h("tr", {}, h("td", { colspan: 7, class: "muted" }, note && !page.seq ? note : "No payouts match.")));
  $("next").disabled = !page.cursor;
  $("first").disabled = S.page <= 1;
  $("page-no").textContent = `page ${count(S.page)}`;
  const what = S.filters.status ? `${STATUS[S.filters.status]} payouts` : "payouts";
  fill($("summary"), `${page.results.length ? `${count(page.results.length)} ${what} on this page` : `no ${what}`}${note ? " · " + note : ""}, oldest first`);
}

function restart() {
  S.gen++;
  refresh();
}

async function main() {
  chrome("ui/payouts");
  tickRelative();
  readLocation();
  S.live = follow({
    shownSeq: () => S.shownSeq,
    relevant: (r) => r.kind === "payout_withdrawn" || r.kind === "rolled_back" || (r.kind === "inputs_applied" && r.payload && (r.payload.payouts || []).length > 0),
    onChange: () => refresh(),
  });
  await boot();
  $("filters").addEventListener("submit", (ev) => {
    ev.preventDefault();
    S.filters = {};
    for (const k of FILTERS) {
      const v = ev.target.elements[k].value.trim();
      if (v || k === "status") S.filters[k] = v;
    }
    S.cursor = "";
    S.cursors = [];
    S.page = 1;
    writeLocation();
    restart();
  });
  $("filters").addEventListener("reset", () => setTimeout(() => {
    $("filters").elements.status.value = "available";
    $("filters").requestSubmit();
  }, 0));
  $("filters").elements.status.addEventListener("change", () => $("filters").requestSubmit());
  $("next").addEventListener("click", () => {
    if (!S.next) return;
    S.cursors.push(S.cursor);
    S.cursor = S.next;
    S.page++;
    writeLocation();
    restart();
  });
  $("first").addEventListener("click", () => {
    S.cursor = "";
    S.cursors = [];
    S.page = 1;
    writeLocation();
    restart();
  });
  window.addEventListener("popstate", () => {
    readLocation();
    restart();
  });
  restart();
}

main();
