// The transaction page: what one transaction did to Marlowe contracts, as
// the follower has it: a step (its inputs, the redeemer; its validity
// interval; the contract's new output with its datum; its payouts, each
// with its withdrawal once withdrawn), the creation of contracts, or a
// withdrawal of payouts. Kept current by the browser's one event stream.

import { ApiError, contractPath, get, pageURL } from "./api.js";
import { stringify } from "./json.js";
import { assets, blockText, count, party, roleName, short, shortContractId, slotTime } from "./format.js";
import { input, inputKind, noInputs } from "./words.js";
import { $, ago, banner, boot, chrome, copyButton, copyable, extLink, fill, follow, h, showTip, site, tickRelative, timeEl } from "./ui.js";

const id = (new URLSearchParams(location.search).get("id") || "").trim().toLowerCase();
const S = { shownSeq: null, live: null, busy: false, again: false, txs: new Set() };

const blockEl = (b) => {
  if (!b) return "–";
  const t = slotTime(site.network, b.slot);
  return h("span", { class: "block", title: `${blockText(b)}, block hash ${b.hash}` }, `block ${count(b.blockNo)}`, t !== null ? [" · ", ago(t, `slot ${count(b.slot)}`)] : null);
};
const dd = (label, ...v) => [h("dt", {}, label), h("dd", {}, ...v)];
const contractLink = (cid, hash = "") => [h("a", { href: pageURL("ui/contract", { id: cid }) + hash, class: "mono", title: cid, dataset: { contract: cid } }, shortContractId(cid)), copyButton(cid)];
const json = (label, v, open = false) => h("details", { class: "json", open: open || undefined }, h("summary", {}, label), h("pre", { class: "source mono small", tabindex: 0 }, stringify(v, 2)));

async function maybe(path, params) {
  try {
    return await get(path, params);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return null;
    throw e;
  }
}

async function read() {
  const [step, withdrawal, ...created] = await Promise.all([
    maybe("transactions/" + id),
    maybe("withdrawals/" + id),
    ...[0, 1, 2, 3].map((ix) => maybe(contractPath(`${id}#${ix}`))),
  ]);
  const creations = [];
  for (const c of created.filter(Boolean)) {
    const hist = await get(contractPath(c.contractId, "/history"), { limit: 1 });
    creations.push({ contract: c, record: hist.results[0], seq: hist.seq, block: hist.block });
  }
  const payouts = [];
  if (step && step.details && step.details.payouts) {
    for (const p of step.details.payouts) payouts.push((p.payoutId && (await maybe("payouts/" + encodeURIComponent(p.payoutId)))) || p);
  }
  return { step, withdrawal, creations, payouts };
}

async function refresh() {
  if (S.busy) {
    S.again = true;
    return;
  }
  S.busy = true;
  try {
    const r = await read();
    render(r);
    const seqs = [r.step, r.withdrawal, ...r.creations].filter(Boolean).map((x) => x.seq);
    const at = r.step || r.withdrawal || r.creations[0];
    S.shownSeq = Math.max(S.shownSeq ?? 0, ...seqs, 0);
    if (at && at.block) showTip({ ...at.block, seq: at.seq });
    S.live.loaded();
  } catch (e) {
    banner(`The query API did not answer: ${e.message}`, "bad", { timeout: 6000 });
  } finally {
    S.busy = false;
    if (S.again) {
      S.again = false;
      setTimeout(refresh, 250);
    }
  }
}

function render({ step, withdrawal, creations, payouts }) {
  S.txs = new Set([step && step.contractId, ...creations.map((c) => c.contract.contractId), ...((withdrawal && withdrawal.payouts) || []).map((p) => p.contractId)].filter(Boolean));
  const parts = [];
  if (step) parts.push(stepSection(step, payouts));
  for (const c of creations) parts.push(creationSection(c));
  if (withdrawal) parts.push(withdrawalSection(withdrawal));
  const what = [step ? (step.kind === "rejected" ? "spent a contract in a way the follower could not read" : "stepped a contract") : null,
    creations.length ? `created ${creations.length === 1 ? "a contract" : creations.length + " contracts"}` : null,
    withdrawal ? "withdrew payouts" : null].filter(Boolean);
  const status = $("tx-status");
  status.dataset.found = what.length ? "yes" : "no";
  fill(status, what.length ? `This transaction ${what.join(", ").replace(/, ([^,]*)$/, " and $1")}.` :
    h("span", { class: "error" }, "The follower knows no Marlowe activity of this transaction (as of the API’s current state): it created no contract, stepped none and withdrew no payout. ", extLink("tx", id) ? ["See it on a Cardano explorer: ", extLink("tx", id)] : null));
  fill($("tx"), parts);
}

function stepSection(step, payouts) {
  const d = step.details || {};
  const iv = d.interval || {};
  const inputs = d.inputs || [];
  const out = d.output;
  return h("section", { class: "panel", dataset: { section: "step" } },
    h("h2", {}, step.kind === "rejected" ? "A step that could not be read" : "A step of a contract"),
    h("dl", { class: "facts" },
      dd("Contract", contractLink(step.contractId, "#tx-" + id), step.closed ? h("span", { class: "badge closed" }, "closed by this step") : null),
      dd("Block", blockEl(step.block)),
      dd("Validity interval", iv.from !== null && iv.from !== undefined ? ["from ", timeEl(Number(iv.from), { rel: false })] : "from the beginning of time",
        " ", iv.to !== null && iv.to !== undefined ? ["to ", timeEl(Number(iv.to), { rel: false })] : "with no end",
        h("span", { class: "muted small" }, ` · slots ${iv.invalidBefore ?? "–"} (inclusive) to ${iv.invalidHereafter ?? "–"} (exclusive)`)),
      dd("Spent", "the contract’s output ", copyable(step.inputUtxo, shortContractId(step.inputUtxo))),
      dd("Script version", d.version || "–"),
      step.kind === "rejected" ? dd("Why it could not be read", step.reason || (d && d.reason) || "no reason given") : null),
    step.kind === "rejected" ? null : [
      h("h3", {}, "Inputs (the redeemer)"),
      inputs.length ? h("ul", { class: "inputs" }, inputs.map((i) => h("li", { dataset: { input: inputKind(i) } }, input(i)))) : h("p", { dataset: { input: "none" } }, noInputs(null, iv)),
      json("The redeemer as the validator reads it: the inputs, core JSON", inputs),
      h("h3", {}, "Outputs"),
      out ? h("div", { dataset: { output: "contract" } },
        h("p", {}, "The contract goes on in output ", copyable(out.utxo, shortContractId(out.utxo)), ` at ${short(out.address, 14, 8)}`, extLink("address", out.address), `, holding ${assets(out.assets)}.`),
        json("Its datum: the contract’s parameters, state and what is left of the contract", out.datum)) :
        h("p", { dataset: { output: "none" } }, "No contract output: the contract closed."),
      payouts.length ? [h("h3", {}, "Payouts"), h("div", { class: "table-wrap" }, payoutTable(payouts))] : h("p", { class: "muted" }, "No payouts."),
    ]);
}

const STATUS = { available: "waiting to be withdrawn", withdrawn: "withdrawn", paid: "paid to the address" };

function payoutTable(payouts) {
  return h("table", { class: "cards" },
    h("caption", { class: "visually-hidden" }, "Payouts"),
    h("thead", {}, h("tr", {}, ["Payout", "To", "Assets", "From", "Status"].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, payouts.map((p) => h("tr", { dataset: { payout: p.payoutId || "", status: p.status || "" } },
      h("td", { class: "mono", dataset: { label: "Payout" } }, p.payoutId ? copyable(p.payoutId, shortContractId(p.payoutId)) : "–"),
      h("td", { dataset: { label: "To" } }, p.role !== undefined && p.role !== null ? roleName(p.role) : p.address ? [short(p.address, 12, 6), extLink("address", p.address)] : "?"),
      h("td", { dataset: { label: "Assets" } }, assets(p.assets)),
      h("td", { dataset: { label: "From" } }, (p.payments || []).map((x) => `${party(x.from)}’s account (${assets(x.assets)})`).join(", ") || "–"),
      h("td", { dataset: { label: "Status" } }, p.status ? h("span", { class: "badge " + (p.status === "available" ? "open" : "closed") }, STATUS[p.status] || p.status) : "–",
        p.withdrawal ? [" by ", h("a", { href: pageURL("ui/transaction", { id: p.withdrawal.withdrawalId }), class: "mono" }, short(p.withdrawal.withdrawalId, 8, 4)), " · ", blockEl(p.withdrawal.block)] : null)))));
}

function creationSection({ contract: c, record }) {
  const p = (record && record.payload) || {};
  return h("section", { class: "panel", dataset: { section: "creation" } },
    h("h2", {}, "The creation of a contract"),
    h("dl", { class: "facts" },
      dd("Contract", contractLink(c.contractId)),
      dd("Block", blockEl(c.block)),
      dd("Locked at creation", assets(p.assets)),
      dd("Address", copyable(c.address, short(c.address, 16, 8)), extLink("address", c.address)),
      dd("Roles currency", c.roleTokenMintingPolicyId ? [copyable(c.roleTokenMintingPolicyId, short(c.roleTokenMintingPolicyId, 10, 6)), extLink("policy", c.roleTokenMintingPolicyId)] : h("span", { class: "muted" }, "none")),
      dd("Roles minted", p.mintedRoles && p.mintedRoles.length ? p.mintedRoles.map(roleName).join(", ") : h("span", { class: "muted" }, "none")),
      dd("Tags", Object.keys(c.tags || {}).length ? Object.keys(c.tags).map((t) => h("a", { class: "tag", href: pageURL("", { tag: t }) }, t)) : h("span", { class: "muted" }, "none"))),
    p.datum ? json("Its datum: the contract’s parameters, initial state and contract", p.datum) : null,
    c.metadata && Object.keys(c.metadata).length ? json("Its metadata", c.metadata) : null);
}

function withdrawalSection(w) {
  return h("section", { class: "panel", dataset: { section: "withdrawal" } },
    h("h2", {}, "A withdrawal of payouts"),
    h("dl", { class: "facts" }, dd("Block", blockEl(w.block)), dd("Payouts withdrawn", count((w.payouts || []).length))),
    h("div", { class: "table-wrap" }, h("table", { class: "cards" },
      h("caption", { class: "visually-hidden" }, "Payouts withdrawn"),
      h("thead", {}, h("tr", {}, ["Payout", "Contract", "Role", "Assets"].map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, (w.payouts || []).map((p) => h("tr", { dataset: { payout: p.payoutId } },
        h("td", { class: "mono", dataset: { label: "Payout" } }, copyable(p.payoutId, shortContractId(p.payoutId))),
        h("td", { dataset: { label: "Contract" } }, contractLink(p.contractId, "#tx-" + id)),
        h("td", { dataset: { label: "Role" } }, p.role !== undefined && p.role !== null ? roleName(p.role) : "–"),
        h("td", { dataset: { label: "Assets" } }, assets(p.assets))))))));
}

async function main() {
  chrome("ui/transaction");
  tickRelative();
  if (!/^[0-9a-f]{64}$/.test(id)) {
    fill($("tx-status"), h("span", { class: "error" }, id ? `“${id}” is not a transaction id: a transaction id has 64 hex digits.` : "No transaction id: open this page from a contract, or add ?id=TXID (64 hex digits)."));
    return;
  }
  document.title = `Transaction ${short(id, 8, 6)} · marlowe-follower`;
  fill($("title-id"), copyable(id, short(id, 10, 8)));
  S.live = follow({
    shownSeq: () => S.shownSeq,
    // Records of this transaction, of the contracts it touched, and rollbacks.
    relevant: (r) => r.txId === id || r.kind === "rolled_back" || S.txs.has(r.contractId),
    onChange: () => refresh(),
  });
  await boot();
  const x = extLink("tx", id);
  if (x) $("title-id").append(x);
  await refresh();
}

main();
