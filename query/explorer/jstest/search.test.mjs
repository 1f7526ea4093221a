// The search box's classification: what each input is, and why input
// that looks like an id, an address or a policy but does not parse is
// not searched.
import test from "node:test";
import assert from "node:assert/strict";
import { bech32Error, classify } from "../static/js/search.js";

const TX = "4e3fb53e4e4a223f4897cfc25424cbfaad034d6838922707cca7f27565d7b251";
const POLICY = "f55f89fd61b245a7e055f5372238d3395433dcafc47f89aa89617509";
// Valid bech32 (BIP 173 and CIP-19 test vectors).
const ADDR = "addr1qx2fxv2umyhttkxyxp8x0dlpdt3k6cwng5pxj3jhsydzer3n0d3vllmyqwsx5wktcd8cc3sq835lu7drv2xwl2wywfgse35a3x";
const ADDR_TEST = "addr_test1qz2fxv2umyhttkxyxp8x0dlpdt3k6cwng5pxj3jhsydzer3n0d3vllmyqwsx5wktcd8cc3sq835lu7drv2xwl2wywfgs68faae";

test("ids, policies, roles and addresses", () => {
  assert.deepEqual(classify(`${TX}#1`), { kind: "contract", value: `${TX}#1` });
  assert.deepEqual(classify(`  ${TX.toUpperCase()}#0 `), { kind: "contract", value: `${TX}#0` });
  assert.deepEqual(classify(TX), { kind: "tx", value: TX });
  assert.deepEqual(classify(POLICY), { kind: "policy", value: POLICY });
  assert.deepEqual(classify(`${POLICY}.c.marlowe`), { kind: "role", value: `${POLICY}.c.marlowe` });
  assert.deepEqual(classify(ADDR), { kind: "address", value: ADDR });
  assert.deepEqual(classify(ADDR_TEST), { kind: "address", value: ADDR_TEST });
  assert.deepEqual(classify(ADDR.toUpperCase()), { kind: "address", value: ADDR });
  assert.deepEqual(classify(""), { kind: "empty" });
});

test("anything else is a tag", () => {
  for (const t of ["actus-pam", "devnet", "deadbeef", "my tag", "1564", "beef.cafe"]) assert.deepEqual(classify(t), { kind: "tag", value: t });
});

test("what looks like an id or an address but does not parse says why", () => {
  const why = (q, opts) => {
    const c = classify(q, opts);
    assert.equal(c.kind, "invalid", q);
    return c.why;
  };
  assert.match(why("deadbeef#0"), /contract id \(TXID#INDEX\), but its transaction id has 8 hex digits: a transaction id has 64/);
  assert.match(why(`${TX}#`), /output index after # is missing/);
  assert.match(why(`${TX}#01`), /leading zero/);
  assert.match(why(`${TX}#70000`), /too large/);
  assert.match(why(`${TX.slice(0, -1)}x#0`), /before # is not hexadecimal/);
  assert.match(why(TX.slice(1)), /transaction id \(64 hex digits\), but it has 63/);
  assert.match(why(POLICY + "ab"), /policy id \(56 hex digits\), but it has 58/);
  assert.match(why(`${POLICY.slice(2)}.alice`), /party role \(POLICY.NAME\), but its policy id has 54 hex digits/);
  assert.match(why("addr_test1qqbad"), /testnet address \(bech32\), but it is too short/);
  assert.match(why(ADDR.slice(0, -1) + "q"), /checksum does not match/);
  assert.match(why(ADDR.replace("x2f", "xbf")), /“b” is not a bech32 character/);
  assert.match(why("addr1QX2fxv2umyhttkxyxp8x0dlpdt3k6cwng5pxj3jhsydzer3n0d3vllmyqwsx5wktcd8cc3sq835lu7drv2xwl2wywfgse35a3x"), /mixes upper and lower case/);
  assert.match(why("stake1uyehkck0lajq8gr28t9uxnuvgcqrc6070x3k9r8048z8y5gh6ffgw"), /stake address: contracts name their parties by payment address or role/);
  assert.match(why("asset1rjklcrnsdzqp65wjgrg55sy9723kw09mlgvlc3"), /asset fingerprint: .* policy id/);
  // The network's own kind of address.
  assert.match(why(ADDR, { network: "preprod" }), /follows preprod, whose addresses start with addr_test1/);
  assert.match(why(ADDR_TEST, { network: "mainnet" }), /follows mainnet, whose addresses start with addr1/);
  assert.equal(classify(ADDR, { network: "devnet" }).kind, "address");
});

test("bech32 checksums (BIP 173 vectors)", () => {
  for (const ok of ["A12UEL5L", "a12uel5l", "abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxw", "split1checkupstagehandshakeupstreamerranterredcaperred2y9e3w"]) assert.equal(bech32Error(ok), "", ok);
  assert.notEqual(bech32Error("split1checkupstagehandshakeupstreamerranterredcaperred2y9e2w"), "");
  assert.notEqual(bech32Error("pzry9x0s0muk"), "");
});
