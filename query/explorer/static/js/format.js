// Formatting of Marlowe values for people: amounts, tokens, parties,
// identifiers, dates and how far away they are, chain slots as times. No
// DOM here: the unit tests (node --test) run these as they are.

import { big } from "./json.js";

/** Slot configurations of the networks /status names (as history.SlotConfigFor and the devnet). */
export const SLOTS = {
  mainnet: { zeroSlot: 4492800, zeroTime: 1596059091000, slotLength: 1000 },
  preprod: { zeroSlot: 86400, zeroTime: 1655769600000, slotLength: 1000 },
  preview: { zeroSlot: 0, zeroTime: 1666656000000, slotLength: 1000 },
  devnet: { zeroSlot: 0, zeroTime: -1000000000, slotLength: 1 },
};

/**
 * learnClock takes the slot clock /status gives (slotClock) for its
 * network, so that slotTime knows any network's, not only those above.
 */
export function learnClock(network, clock) {
  if (!network || !clock || !(Number(clock.slotLengthMillis) > 0)) return;
  SLOTS[network] = { zeroSlot: Number(clock.zeroSlot), zeroTime: Number(clock.zeroTimeMillis), slotLength: Number(clock.slotLengthMillis) };
}

/** slotTime returns the POSIX time (ms) at which a slot begins, or null for an unknown network. */
export function slotTime(network, slot) {
  const c = SLOTS[network];
  if (!c || slot === undefined || slot === null) return null;
  return c.zeroTime + (Number(slot) - c.zeroSlot) * c.slotLength;
}

/** short abbreviates a long identifier: the first and last few characters. */
export function short(s, head = 8, tail = 6) {
  s = String(s ?? "");
  return s.length <= head + tail + 1 ? s : s.slice(0, head) + "…" + s.slice(-tail);
}

/** shortContractId abbreviates TXID#INDEX keeping the index. */
export function shortContractId(id) {
  const [tx, ix] = String(id).split("#");
  return ix === undefined ? short(tx) : short(tx, 8, 4) + "#" + ix;
}

/** roleName writes a role name as people read it (the core JSON \u0000 escape shown as hex). */
export function roleName(name) {
  name = String(name ?? "");
  if (name === "") return "“” (empty role name)";
  if (name.startsWith("\u00000x")) return "0x" + name.slice(3);
  if (name.startsWith("\u0000\u0000\u0000")) return name.slice(2);
  return name;
}

/** party writes a Marlowe party: its role name, or its address abbreviated (full with full: true). */
export function party(p, { full = false } = {}) {
  if (!p || typeof p !== "object") return "‹unreadable›";
  if ("role_token" in p) return roleName(p.role_token);
  if ("address" in p) return full ? p.address : short(p.address, 12, 6);
  return "‹unreadable›";
}

/** possessive: "Bob's". */
export function possessive(name) {
  return name + "’s";
}

/** isAda reports whether a Marlowe token is ada. */
export function isAda(t) {
  return !t || (t.currency_symbol === "" && t.token_name === "");
}

/** tokenName writes a token: "ADA", its name, or its policy abbreviated when it has no name. */
export function tokenName(t) {
  if (isAda(t)) return "ADA";
  if (t.token_name === "") return "token " + short(t.currency_symbol, 6, 4);
  return roleName(t.token_name);
}

/** ada writes a lovelace amount in ADA with the decimals it needs: 1500000 -> "1.5". */
export function ada(lovelace) {
  const v = big(lovelace);
  const neg = v < 0n;
  const a = neg ? -v : v;
  const whole = a / 1000000n;
  const frac = (a % 1000000n).toString().padStart(6, "0").replace(/0+$/, "");
  return (neg ? "-" : "") + group(whole.toString()) + (frac ? "." + frac : "");
}

/** group puts thin separators between thousands: 1234567 -> "1,234,567". */
export function group(digits) {
  const s = String(digits);
  const neg = s.startsWith("-");
  const d = neg ? s.slice(1) : s;
  if (d.length <= 4) return s;
  return (neg ? "-" : "") + d.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** amount writes a quantity of a Marlowe token: "100 ADA", "500 Globe". */
export function amount(quantity, token) {
  if (isAda(token)) return ada(quantity) + " ADA";
  return group(big(quantity).toString()) + " " + tokenName(token);
}

/** assets writes an assets object of the API ({lovelace, tokens: {policy: {name: n}}}). */
export function assets(a) {
  if (!a) return "nothing";
  const parts = [];
  if (big(a.lovelace) !== 0n) parts.push(ada(a.lovelace) + " ADA");
  for (const [policy, names] of Object.entries(a.tokens || {})) {
    for (const [name, n] of Object.entries(names)) {
      parts.push(amount(n, { currency_symbol: policy, token_name: name }));
    }
  }
  return parts.length ? parts.join(", ") : "nothing";
}

/** assetsEmpty reports whether an assets object holds nothing. */
export function assetsEmpty(a) {
  return assets(a) === "nothing";
}

/** date writes a POSIX time (ms) as a date and time; timeZone for tests ("UTC"). */
export function date(ms, { timeZone } = {}) {
  const t = Number(ms);
  if (!Number.isFinite(t)) return "?";
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return String(ms) + " ms";
  return new Intl.DateTimeFormat("en-GB", {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
    timeZone, timeZoneName: "short",
  }).format(d);
}

/** iso writes a POSIX time (ms) as ISO 8601, for <time datetime>. */
export function iso(ms) {
  const d = new Date(Number(ms));
  return Number.isNaN(d.getTime()) ? "" : d.toISOString();
}

const UNITS = [
  ["year", 365.25 * 24 * 3600e3],
  ["month", 30.44 * 24 * 3600e3],
  ["week", 7 * 24 * 3600e3],
  ["day", 24 * 3600e3],
  ["hour", 3600e3],
  ["minute", 60e3],
  ["second", 1e3],
];

/** relative says how far a time is from now: "in 3 days", "2 years ago", "now". */
export function relative(ms, now = Date.now()) {
  const diff = Number(ms) - now;
  const abs = Math.abs(diff);
  if (!Number.isFinite(diff)) return "";
  if (abs < 1000) return "now";
  const rtf = new Intl.RelativeTimeFormat("en", { numeric: "always" });
  for (const [unit, size] of UNITS) {
    if (abs >= size || unit === "second") return rtf.format(Math.trunc(diff / size), unit);
  }
  return "";
}

/** duration writes a span of seconds: "3 min 20 s", "2 h 5 min". */
export function duration(seconds) {
  let s = Math.max(0, Math.round(Number(seconds)));
  if (!Number.isFinite(s)) return "?";
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  if (d) return `${d} d ${h} h`;
  if (h) return `${h} h ${m} min`;
  if (m) return `${m} min ${s} s`;
  return `${s} s`;
}

/** number writes a count with thousands separators. */
export function count(n) {
  return group(big(n).toString());
}

/** blockText: "block 1,231 (slot 24,940,268)". */
export function blockText(b) {
  if (!b) return "?";
  return `block ${count(b.blockNo)} (slot ${count(b.slot)})`;
}
