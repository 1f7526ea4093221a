// The contract page's views that need nothing but what they are given:
// the participants, the contract as JSON or in Marlowe notation (with copy
// and download), the payouts, and a block with how long ago (contract-page.js).

import { pageURL } from "./api.js";
import { stringify } from "./json.js";
import { assets, blockText, count, party, roleName, short, shortContractId, slotTime } from "./format.js";
import { notation } from "./notation.js";
import { participants } from "./parties.js";
import { continuationsOf } from "./tree.js";
import { $, ago, copyable, extLink, fill, h, site } from "./ui.js";

const shown = { sourceKey: "" };

const blockTime = (b) => (b ? slotTime(site.network, b.slot) : null);

// blockEl: "block 1,231 · 3 min ago", the slot, date and hash on hover.
export function blockEl(b) {
  if (!b) return "–";
  const t = blockTime(b);
  return h("span", { class: "block", title: `${blockText(b)}, block hash ${b.hash}` }, `block ${count(b.blockNo)}`, t !== null ? [" · ", ago(t, `slot ${count(b.slot)}`)] : null);
}

// renderParties: every party the contract names, what each does and what was paid out to each.
export function renderParties(c, history, payouts) {
  const created = history.find((r) => r.kind === "contract_created" && r.rolledBackBy === undefined);
  const continuations = continuationsOf(history.filter((r) => r.kind === "inputs_applied" && r.rolledBackBy === undefined).map((r) => r.payload.inputs));
  const list = participants(c.initialContract, { continuations, payouts, minted: (created && created.payload.mintedRoles) || [] });
  const el = $("parties");
  if (!list.length) {
    fill(el, h("p", { class: "muted" }, "The contract names no party."));
    return;
  }
  const what = (x) => [x.deposits ? "deposits" : null, x.chooses ? "chooses" : null, x.receives ? "is paid" : null].filter(Boolean).join(", ") || "named only";
  const paid = (x) => {
    const parts = [];
    if (x.payouts.available) parts.push(h("span", { class: "badge open" }, assets(x.payouts.available) + " to withdraw"));
    if (x.payouts.withdrawn) parts.push(h("span", {}, assets(x.payouts.withdrawn) + " withdrawn"));
    if (x.payouts.paid) parts.push(h("span", {}, assets(x.payouts.paid) + " paid to the address"));
    return parts.length ? parts.flatMap((p, i) => (i ? [" · ", p] : [p])) : h("span", { class: "muted" }, "nothing yet");
  };
  const currency = c.roleTokenMintingPolicyId;
  fill(el, h("div", { class: "table-wrap" }, h("table", { class: "cards" },
    h("caption", { class: "visually-hidden" }, "Participants"),
    h("thead", {}, h("tr", {}, ["Party", "Is", "In the contract it", "Paid out"].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, list.map((x) => h("tr", { dataset: { party: x.key } },
      h("td", { dataset: { label: "Party" } }, x.role !== undefined
        ? [h("strong", {}, roleName(x.role)), currency ? [" ", h("a", { class: "small", href: pageURL("ui/payouts", { roleToken: `${currency}.${x.role}` }), title: "The payouts of this role token" }, "its payouts")] : null]
        : [copyable(x.address, short(x.address, 14, 8)), extLink("address", x.address), " ", h("a", { class: "small", href: pageURL("", { partyAddress: x.address }) }, "its contracts")]),
      h("td", { dataset: { label: "Is" } }, x.role !== undefined ? ["a role", x.minted ? h("span", { class: "muted small" }, " (token minted at creation)") : null] : "an address"),
      h("td", { dataset: { label: "In the contract it" } }, what(x)),
      h("td", { dataset: { label: "Paid out" } }, paid(x))))))),
    currency ? h("p", { class: "small muted" }, "A role is held by whoever holds its token (roles currency ", copyable(currency, short(currency, 8, 4)), extLink("policy", currency), "); its payouts wait in the payout validator until the holder withdraws them.") : null);
}

// ---- the contract as JSON and in Marlowe notation ----

function sourceText(c) {
  const which = document.querySelector('input[name="src-which"]:checked').value;
  const form = document.querySelector('input[name="src-form"]:checked').value;
  const v = which === "initial" ? c.initialContract : c.currentContract;
  if (v === null || v === undefined) return { text: "", which, form, empty: true };
  return { text: form === "json" ? stringify(v, 2) : notation(v), which, form };
}

export function renderSource(c) {
  const s = sourceText(c);
  const key = [s.which, s.form, c.lastSeq].join("/");
  if (key === shown.sourceKey) return;
  shown.sourceKey = key;
  const pre = $("source");
  pre.textContent = s.empty ? "Nothing is left: the contract is closed." : s.text;
  pre.dataset.which = s.which;
  pre.dataset.form = s.form;
  $("src-note").textContent = s.empty ? "" : `${count(s.text.split("\n").length)} lines, ${count(new TextEncoder().encode(s.text).length)} bytes`;
}

function sourceFile(c) {
  const s = sourceText(c);
  const base = `contract-${c.contractId.replace("#", "-")}-${s.which}`;
  return s.form === "json" ? { name: base + ".json", type: "application/json", text: s.text + "\n" } : { name: base + ".marlowe", type: "text/plain", text: s.text + "\n" };
}

export function renderPayouts(payouts) {
  const el = $("payouts");
  if (!payouts.length) {
    fill(el, h("p", { class: "muted" }, "No payouts yet."));
    return;
  }
  const statusText = { available: "waiting to be withdrawn", withdrawn: "withdrawn", paid: "paid to the address" };
  fill(el, h("div", { class: "table-wrap" }, h("table", {},
    h("caption", { class: "visually-hidden" }, "Payouts"),
    h("thead", {}, h("tr", {}, ["Payout", "To", "Assets", "Paid in", "Status", "Withdrawal"].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, payouts.map((p) => h("tr", { dataset: { payout: p.payoutId || "", status: p.status } },
      h("td", { class: "mono" }, p.payoutId ? copyable(p.payoutId, shortContractId(p.payoutId)) : "–"),
      h("td", {}, p.role !== undefined && p.role !== null ? party({ role_token: p.role }) : p.address ? party({ address: p.address }) : "?"),
      h("td", {}, assets(p.assets)),
      h("td", { class: "small" }, blockEl(p.block)),
      h("td", {}, h("span", { class: "badge " + (p.status === "available" ? "open" : "closed") }, statusText[p.status] || p.status)),
      h("td", { class: "small" }, p.withdrawal ? [copyable(p.withdrawal.withdrawalId, short(p.withdrawal.withdrawalId, 10, 6)), " in ", blockEl(p.withdrawal.block)] : "–"),
    ))))));
}

/** wireSource makes the JSON view's choices, Copy and Download work on contract(). */
export function wireSource(contract) {
  for (const r of document.querySelectorAll('input[name="src-which"], input[name="src-form"]')) r.addEventListener("change", () => contract() && renderSource(contract()));
  $("src-copy").addEventListener("click", async () => {
    if (!contract()) return;
    try {
      await navigator.clipboard.writeText(sourceFile(contract()).text);
      $("src-note").textContent = "Copied.";
    } catch {
      $("src-note").textContent = "The browser did not let the page copy: select the text instead.";
    }
  });
  $("src-download").addEventListener("click", () => {
    if (!contract()) return;
    const f = sourceFile(contract());
    const a = h("a", { href: URL.createObjectURL(new Blob([f.text], { type: f.type })), download: f.name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  });
}
