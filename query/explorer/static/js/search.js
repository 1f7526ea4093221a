// What a search box input is: a contract id, a transaction id, a policy
// (roles currency), a role (POLICY.NAME), a bech32 address, or a tag; and,
// for input that looks like one of the first five but does not parse, why
// not. No DOM: the unit tests run it as it is.

const HEX = /^[0-9a-fA-F]+$/;
const BECH32 = "qpzry9x8gf2tvdw0s3jn54khce6mua7l";

/**
 * classify returns {kind, value} for a search: kind is "contract" (value
 * TXID#IX, lower case), "tx" (64 hex digits), "policy" (56 hex digits),
 * "role" (POLICY.NAME), "address" (bech32 addr/addr_test), "tag", or
 * "invalid" with why: a sentence saying what the input looks like and
 * what is wrong with it; "empty" for nothing. network (as /status names
 * it), when given, catches addresses of the other kind of network: a
 * mainnet address on preprod or preview, a testnet one on mainnet.
 */
export function classify(text, { network = "" } = {}) {
  const q = String(text ?? "").trim();
  if (q === "") return { kind: "empty" };
  const hash = q.indexOf("#");
  if (hash >= 0) {
    const tx = q.slice(0, hash);
    const ix = q.slice(hash + 1);
    if (HEX.test(tx) || /^\d*$/.test(ix)) {
      if (!HEX.test(tx)) return invalid("a contract id (TXID#INDEX), but what comes before # is not hexadecimal");
      if (tx.length !== 64) return invalid(`a contract id (TXID#INDEX), but its transaction id has ${tx.length} hex digit${tx.length === 1 ? "" : "s"}: a transaction id has 64`);
      if (!/^\d+$/.test(ix)) return invalid("a contract id (TXID#INDEX), but the output index after # is missing");
      if (ix.length > 1 && ix.startsWith("0")) return invalid("a contract id (TXID#INDEX), but its output index has a leading zero");
      if (Number(ix) > 65535) return invalid(`a contract id (TXID#INDEX), but its output index ${ix} is too large (a transaction has at most 65,536 outputs)`);
      return { kind: "contract", value: tx.toLowerCase() + "#" + ix };
    }
  }
  if (HEX.test(q)) {
    if (q.length === 64) return { kind: "tx", value: q.toLowerCase() };
    if (q.length === 56) return { kind: "policy", value: q.toLowerCase() };
    if (q.length >= 40) {
      const near = Math.abs(q.length - 64) < Math.abs(q.length - 56) ? "a transaction id (64 hex digits)" : "a policy id (56 hex digits)";
      return invalid(`${near}, but it has ${q.length} hex digits`);
    }
    return { kind: "tag", value: q };
  }
  const dot = q.indexOf(".");
  if (dot >= 0 && HEX.test(q.slice(0, dot)) && dot >= 40) {
    if (dot !== 56) return invalid(`a party role (POLICY.NAME), but its policy id has ${dot} hex digits: a policy id has 56`);
    return { kind: "role", value: q.slice(0, dot).toLowerCase() + q.slice(dot) };
  }
  const lower = q.toLowerCase();
  const prefix = /^(addr|addr_test|stake|stake_test|asset|pool|drep)1/.exec(lower);
  if (prefix) {
    const what = { addr: "a mainnet address", addr_test: "a testnet address", stake: "a stake address", stake_test: "a testnet stake address", asset: "an asset fingerprint", pool: "a stake pool id", drep: "a DRep id" }[prefix[1]];
    const why = bech32Error(q);
    if (why) return invalid(`${what} (bech32), but ${why}`);
    if (prefix[1] === "addr" || prefix[1] === "addr_test") {
      const testnet = network === "preprod" || network === "preview";
      if ((testnet && prefix[1] === "addr") || (network === "mainnet" && prefix[1] === "addr_test")) {
        return invalid(`${what}, but this follower follows ${network}, whose addresses start with ${testnet ? "addr_test1" : "addr1"}`);
      }
      return { kind: "address", value: lower };
    }
    const instead = prefix[1] === "asset" ? "search for its policy id (56 hex digits) or a role (POLICY.NAME)" : "search for a payment address (addr…)";
    return invalid(`${what}: contracts name their parties by payment address or role, so it cannot be searched; ${instead}`);
  }
  return { kind: "tag", value: q };
}

function invalid(looks) {
  return { kind: "invalid", why: `This looks like ${looks}.` };
}

/** bech32Error says what is wrong with a bech32 string (BIP 173, no length limit as in CIP-5), or "" when nothing is. */
export function bech32Error(s) {
  if (s !== s.toLowerCase() && s !== s.toUpperCase()) return "it mixes upper and lower case";
  const str = s.toLowerCase();
  const sep = str.lastIndexOf("1");
  if (sep < 1) return "it has no separator 1";
  const data = str.slice(sep + 1);
  if (data.length < 6) return "it is too short to hold a checksum";
  const values = [];
  for (const c of data) {
    const v = BECH32.indexOf(c);
    if (v < 0) return `“${c}” is not a bech32 character (b, i, o and 1 are never used)`;
    values.push(v);
  }
  const hrp = str.slice(0, sep);
  const expanded = [...[...hrp].map((c) => c.charCodeAt(0) >> 5), 0, ...[...hrp].map((c) => c.charCodeAt(0) & 31)];
  if (polymod([...expanded, ...values]) !== 1) return "its checksum does not match (a character is mistyped or missing)";
  return "";
}

function polymod(values) {
  const GEN = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];
  let chk = 1;
  for (const v of values) {
    const top = chk >>> 25;
    chk = (((chk & 0x1ffffff) << 5) ^ v) >>> 0;
    for (let i = 0; i < 5; i++) if ((top >>> i) & 1) chk = (chk ^ GEN[i]) >>> 0;
  }
  return chk;
}
