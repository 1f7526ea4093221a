// What kind of contract this is, for the list's Type column and filter:
// from its tags where one names a kind (the tags of Marlowe's templates
// and reference contracts: "escrow", "zero-coupon-bond", ...), otherwise
// from the contract's shape (who deposits what, who chooses, how it
// pays). No DOM: the unit tests check every reference contract.

const is = (o) => o !== null && typeof o === "object" && !Array.isArray(o);
const has = (o, ...keys) => is(o) && keys.every((k) => k in o);

/** TAG_TYPES: the kinds tags name, first match wins (matched on the tag in lower case, _ . and spaces read as -). */
export const TAG_TYPES = [
  [/\bzero[-_ ]?coupon/, "Zero-coupon bond"],
  [/\bcoupon[-_ ]?bond/, "Coupon bond"],
  [/\bcontract[-_ ]for[-_ ]differences|\bcfd\b/, "Contract for differences"],
  [/\bactus\b/, "ACTUS"],
  [/\bcovered[-_ ]call|\boption\b/, "Option"],
  [/\bescrow/, "Escrow"],
  [/\bswap/, "Swap"],
  [/\bauction/, "Auction"],
  [/\bvesting/, "Vesting"],
  [/\bloan|\blend/, "Loan"],
  [/\bairdrop/, "Airdrop"],
  [/\broyalt/, "NFT with royalty"],
  [/\bnft\b.*\b(purchase|sale|buy)|\b(purchase|sale|buy)\b.*\bnft\b/, "NFT sale"],
  [/\bnft/, "NFT"],
  [/\bgame|\bguess|\blotter/, "Game"],
  [/\bgift|\bbeam\b|\bpayment|\bdonation/, "Payment"],
];

/** SHAPE_TYPES: the kinds the shape gives, in the order shapeType tries them. */
export const SHAPE_TYPES = ["Empty", "Oracle-based", "Swap", "Choice-based", "Payment schedule", "Payment", "Notify-based", "Conditional"];

/** tagType is the kind a contract's tags name, or null. */
export function tagType(tags) {
  for (const tag of Object.keys(tags || {})) {
    const t = tag.toLowerCase().replace(/[_\s.]+/g, "-"); // (english_auction, "Vesting Schedule")
    for (const [re, type] of TAG_TYPES) if (re.test(t)) return { type, from: "tag", tag };
  }
  return null;
}

// An oracle: a party named so (or a known feed), or a choice named as a
// price feed is (ADA/USD, inc-adausd, "Price").
const ORACLE_OWNER = /oracle|kraken|coingecko/i;
const ORACLE_CHOICE = /^[a-z]{3,5}\s*\/\s*[a-z]{3,5}$|^(inc|dir)-[a-z]+$|price|exchange rate/i;

/** features reads what a contract does, over all its branches (revealed continuations: continuations, hash -> contract). */
export function features(c, continuations = new Map()) {
  const f = { deposits: 0, depositors: new Map(), choices: 0, oracleChoices: 0, notifies: 0, pays: 0, ifs: 0, whens: 0, depth: 0, merkleized: 0, close: 0 };
  const key = (p) => (has(p, "role_token") ? "role:" + p.role_token : has(p, "address") ? "addr:" + p.address : "?");
  const tok = (t) => (has(t, "currency_symbol", "token_name") ? t.currency_symbol + "." + t.token_name : "?");
  const seen = new Set();
  const walk = (c, depth) => {
    if (depth > 500) return;
    f.depth = Math.max(f.depth, depth);
    if (c === "close") f.close++;
    else if (has(c, "pay", "then")) {
      f.pays++;
      walk(c.then, depth + 1);
    } else if (has(c, "if", "then", "else")) {
      f.ifs++;
      walk(c.then, depth + 1);
      walk(c.else, depth + 1);
    } else if (has(c, "when", "timeout_continuation")) {
      f.whens++;
      for (const k of c.when || []) {
        const a = k.case;
        if (has(a, "party", "deposits", "of_token")) {
          f.deposits++;
          const d = f.depositors.get(key(a.party)) || new Set();
          d.add(tok(a.of_token));
          f.depositors.set(key(a.party), d);
        } else if (has(a, "for_choice", "choose_between")) {
          f.choices++;
          const owner = a.for_choice.choice_owner;
          const name = String(a.for_choice.choice_name || "");
          if (ORACLE_OWNER.test(key(owner)) || ORACLE_CHOICE.test(name)) f.oracleChoices++;
        } else if (has(a, "notify_if")) f.notifies++;
        if ("merkleized_then" in k) {
          f.merkleized++;
          const next = continuations.get(k.merkleized_then);
          if (next !== undefined && !seen.has(k.merkleized_then)) {
            seen.add(k.merkleized_then);
            walk(next, depth + 1);
          }
        } else walk(k.then, depth + 1);
      }
      walk(c.timeout_continuation, depth + 1);
    } else if (has(c, "let", "then") || has(c, "assert", "then")) walk(c.then, depth + 1);
  };
  walk(c, 0);
  return f;
}

/** shapeType is the kind a contract's shape gives (one of SHAPE_TYPES). */
export function shapeType(c, continuations) {
  if (c === "close") return { type: "Empty", from: "shape", why: "it only closes" };
  const f = features(c, continuations);
  const tokensBy = [...f.depositors.values()].map((s) => [...s].sort().join(","));
  if (f.oracleChoices > 0) return { type: "Oracle-based", from: "shape", why: "an oracle chooses a value it uses" };
  if (f.depositors.size >= 2 && new Set(tokensBy).size >= 2 && f.choices === 0) return { type: "Swap", from: "shape", why: "two parties deposit different tokens" };
  if (f.choices > 0) return { type: "Choice-based", from: "shape", why: "parties choose how it goes on" };
  if (f.deposits >= 3 && f.whens >= 3) return { type: "Payment schedule", from: "shape", why: "deposits due one after another" };
  if (f.deposits > 0) return { type: "Payment", from: "shape", why: "deposits paid on" };
  if (f.notifies > 0) return { type: "Notify-based", from: "shape", why: "it waits for notifications" };
  return { type: "Conditional", from: "shape", why: "it pays out on conditions" };
}

/** contractType: the tags' kind, else the shape's. */
export function contractType(tags, c, continuations) {
  return tagType(tags) || shapeType(c, continuations);
}

/** ALL_TYPES lists every kind, for the filter. */
export const ALL_TYPES = [...new Set([...TAG_TYPES.map(([, t]) => t), ...SHAPE_TYPES])];
