// The participants of a contract: every party its contract names (roles
// and addresses, in its revealed continuations too), what each can do
// (deposit, choose), and what was paid out to each (by payout status).
// No DOM: the unit tests run it as it is.

import { big } from "./json.js";

const is = (o) => o !== null && typeof o === "object" && !Array.isArray(o);
const has = (o, ...keys) => is(o) && keys.every((k) => k in o);

/** partyKey names a party uniquely: "role:NAME" or "address:ADDR". */
export function partyKey(p) {
  if (has(p, "role_token")) return "role:" + p.role_token;
  if (has(p, "address")) return "address:" + p.address;
  return null;
}

/** addAssets adds b to a (assets objects of the API: {lovelace, tokens: {policy: {name: n}}}), exactly. */
export function addAssets(a, b) {
  const out = { lovelace: big(a ? a.lovelace || 0 : 0) + big(b ? b.lovelace || 0 : 0), tokens: {} };
  for (const x of [a, b]) {
    for (const [policy, names] of Object.entries((x && x.tokens) || {})) {
      for (const [name, n] of Object.entries(names)) {
        out.tokens[policy] = out.tokens[policy] || {};
        out.tokens[policy][name] = big(out.tokens[policy][name] || 0) + big(n);
      }
    }
  }
  return out;
}

/**
 * participants lists the parties of a contract, in the order its contract
 * names them: {key, party, role?, address?, deposits, chooses, receives,
 * minted, payouts: {available, withdrawn, paid} (assets, or null), count}.
 * continuations maps merkleized continuation hashes to the contracts the
 * steps revealed; payouts are the contract's payouts (GET /payouts);
 * minted the role names minted at its creation.
 */
export function participants(contract, { continuations = new Map(), payouts = [], minted = [] } = {}) {
  const byKey = new Map();
  const get = (p) => {
    const key = partyKey(p);
    if (key === null) return null;
    let x = byKey.get(key);
    if (!x) {
      x = { key, party: p, deposits: false, chooses: false, receives: false, minted: false, payouts: { available: null, withdrawn: null, paid: null }, count: 0 };
      if ("role_token" in p) x.role = p.role_token;
      else x.address = p.address;
      byKey.set(key, x);
    }
    return x;
  };
  const seen = new Set();
  const walk = (v, depth) => {
    if (depth > 2000 || v === null || typeof v !== "object") return;
    if (Array.isArray(v)) {
      for (const x of v) walk(x, depth + 1);
      return;
    }
    if (has(v, "party", "deposits")) {
      const x = get(v.party);
      if (x) x.deposits = true;
    }
    if (has(v, "for_choice", "choose_between") && is(v.for_choice)) {
      const x = get(v.for_choice.choice_owner);
      if (x) x.chooses = true;
    }
    if (has(v, "pay", "to") && is(v.to)) {
      const x = v.to.party ? get(v.to.party) : null; // (a pay into an account stays in the contract)
      if (x) x.receives = true;
    }
    if (has(v, "role_token") || has(v, "address")) get(v);
    for (const [k, x] of Object.entries(v)) if (k !== "merkleized_then") walk(x, depth + 1);
    if ("merkleized_then" in v && typeof v.merkleized_then === "string" && !seen.has(v.merkleized_then)) {
      seen.add(v.merkleized_then);
      const next = continuations.get(v.merkleized_then);
      if (next !== undefined) walk(next, depth + 1);
    }
  };
  walk(contract, 0);
  for (const name of minted) {
    const x = get({ role_token: name });
    x.minted = true;
  }
  for (const p of payouts) {
    const x = p.role !== undefined && p.role !== null ? get({ role_token: p.role }) : p.address ? get({ address: p.address }) : null;
    if (!x) continue;
    const k = p.status === "available" || p.status === "withdrawn" || p.status === "paid" ? p.status : "paid";
    x.payouts[k] = addAssets(x.payouts[k], p.assets);
    x.receives = true;
    x.count++;
  }
  return [...byKey.values()];
}
