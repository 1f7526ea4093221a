// The contracts list's type (from tags, else the shape), the
// participants of a contract, and last actions in words.
import test from "node:test";
import assert from "node:assert/strict";
import { addAssets, participants } from "../static/js/parties.js";
import { ALL_TYPES, contractType, SHAPE_TYPES, shapeType, tagType } from "../static/js/types.js";
import { lastAction } from "../static/js/words.js";
import { contracts } from "./reference.mjs";

const ada = { currency_symbol: "", token_name: "" };
const globe = { currency_symbol: "ab", token_name: "Globe" };
const alice = { role_token: "alice" };
const bob = { role_token: "bob" };
const deposit = (p, n, t = ada) => ({ party: p, deposits: n, of_token: t, into_account: p });
const when = (cases, then = "close") => ({ when: cases, timeout: 1000, timeout_continuation: then });

test("the tags of Marlowe's templates and reference contracts name their type", () => {
  const want = {
    "zero-coupon-bond": "Zero-coupon bond", "coupon-bond-guaranteed": "Coupon bond", "contract-for-differences-with-oracle": "Contract for differences", "actus-pam": "ACTUS",
    "covered-call": "Option", escrow: "Escrow", "escrow-with-collateral": "Escrow", "swap-of-ada-and-dollar-token": "Swap", "nft-swap": "Swap", "loan-with-nft-collateral": "Loan",
    "revenue-based-loan": "Loan", "nft-airdrop": "Airdrop", "nft-with-royalty": "NFT with royalty", "simple-nft-purchase": "NFT sale", "nft-purchase-with-stablecoin": "NFT sale",
    "nft-pawned": "NFT", "guessing-game": "Game", "cardano-beam": "Payment", "Vesting Schedule": "Vesting", "english_auction": "Auction",
  };
  for (const [tag, type] of Object.entries(want)) assert.deepEqual(tagType({ devnet: null, [tag]: null }), { type, from: "tag", tag }, tag);
  assert.equal(tagType({ devnet: null, "pangram-1": null }), null);
  assert.equal(tagType({}), null);
  assert.ok(Object.values(want).every((t) => ALL_TYPES.includes(t)));
});

test("the shape names the type of an untagged contract", () => {
  assert.equal(shapeType("close").type, "Empty");
  assert.equal(shapeType(when([{ case: deposit(alice, 5), then: "close" }])).type, "Payment");
  assert.equal(shapeType(when([{ case: deposit(alice, 5), then: when([{ case: deposit(alice, 5), then: when([{ case: deposit(alice, 5), then: "close" }]) }]) }])).type, "Payment schedule");
  assert.equal(shapeType(when([{ case: deposit(alice, 5), then: when([{ case: deposit(bob, 1, globe), then: "close" }]) }])).type, "Swap");
  assert.equal(shapeType(when([{ case: { for_choice: { choice_name: "ok", choice_owner: bob }, choose_between: [{ from: 0, to: 1 }] }, then: "close" }])).type, "Choice-based");
  assert.equal(shapeType(when([{ case: { for_choice: { choice_name: "ADA/USD", choice_owner: bob }, choose_between: [{ from: 0, to: 1e9 }] }, then: "close" }])).type, "Oracle-based");
  assert.equal(shapeType(when([{ case: { for_choice: { choice_name: "x", choice_owner: { role_token: "Oracle" } }, choose_between: [{ from: 0, to: 1 }] }, then: "close" }])).type, "Oracle-based");
  assert.equal(shapeType(when([{ case: { notify_if: true }, then: "close" }])).type, "Notify-based");
  assert.equal(shapeType({ pay: 1, from_account: alice, to: { party: bob }, token: ada, then: "close" }).type, "Conditional");
  // A tag wins over the shape.
  assert.equal(contractType({ escrow: null }, "close").type, "Escrow");
  assert.equal(contractType({}, "close").from, "shape");
});

test("every reference contract has a type from its shape, with a reason", () => {
  for (const { name, contract } of contracts()) {
    const t = shapeType(contract);
    assert.ok(SHAPE_TYPES.includes(t.type) && t.why, name);
  }
  // A few that must read right.
  const byName = Object.fromEntries(contracts().map((c) => [c.name, shapeType(c.contract).type]));
  assert.equal(byName["swap-of-ada-and-dollar-token"], "Swap");
  assert.equal(byName["contract-for-differences-with-oracle"], "Oracle-based");
  assert.equal(byName.escrow, "Choice-based");
});

test("participants: roles and addresses, what each does, and their payouts by status", () => {
  const addr = { address: "addr_test1vq" };
  const c = when([
    { case: deposit(alice, 5), then: { pay: 5, from_account: alice, to: { party: bob }, token: ada, then: "close" } },
    { case: { for_choice: { choice_name: "x", choice_owner: addr }, choose_between: [{ from: 0, to: 1 }] }, merkleized_then: "h1" },
  ]);
  const continuations = new Map([["h1", { pay: 1, from_account: alice, to: { party: { role_token: "carol" } }, token: ada, then: "close" }]]);
  const payouts = [
    { role: "bob", assets: { lovelace: 5000000, tokens: {} }, status: "available" },
    { role: "bob", assets: { lovelace: 1000000, tokens: { ab: { Globe: 3 } } }, status: "available" },
    { role: "alice", assets: { lovelace: 2, tokens: {} }, status: "withdrawn" },
    { address: "addr_test1vq", assets: { lovelace: 7, tokens: {} }, status: "paid" },
  ];
  const list = participants(c, { continuations, payouts, minted: ["alice", "bob", "dave"] });
  const by = Object.fromEntries(list.map((x) => [x.key, x]));
  assert.deepEqual(Object.keys(by), ["role:alice", "role:bob", "address:addr_test1vq", "role:carol", "role:dave"]);
  assert.deepEqual([by["role:alice"].deposits, by["role:alice"].chooses, by["role:alice"].minted], [true, false, true]);
  assert.deepEqual([by["role:bob"].receives, by["role:bob"].count, by["role:bob"].payouts.available], [true, 2, { lovelace: 6000000n, tokens: { ab: { Globe: 3n } } }]);
  assert.equal(by["role:alice"].payouts.withdrawn.lovelace, 2n);
  assert.equal(by["address:addr_test1vq"].chooses, true);
  assert.equal(by["address:addr_test1vq"].payouts.paid.lovelace, 7n);
  assert.equal(by["role:carol"].receives, true, "named in a revealed continuation");
  assert.equal(by["role:dave"].minted, true);
  assert.deepEqual(addAssets(null, { lovelace: 1, tokens: {} }), { lovelace: 1n, tokens: {} });
});

test("every reference contract's parties are found", () => {
  for (const { name, contract } of contracts()) {
    const text = JSON.stringify(contract, (_k, v) => (typeof v === "bigint" ? String(v) : v));
    const roles = new Set([...text.matchAll(/"role_token":"((?:[^"\\]|\\.)*)"/g)].map((m) => JSON.parse(`"${m[1]}"`)));
    const found = new Set(participants(contract).filter((x) => x.role !== undefined).map((x) => x.role));
    assert.deepEqual([...found].sort(), [...roles].sort(), name);
  }
});

test("last actions in a few words", () => {
  const dep = { input_from_party: alice, into_account: alice, of_token: ada, that_deposits: 100000000 };
  const choice = { for_choice_id: { choice_name: "price", choice_owner: bob }, input_that_chooses_num: 3 };
  assert.equal(lastAction("contract_created", { assets: { lovelace: 2000000, tokens: {} } }), "created with 2 ADA");
  assert.equal(lastAction("contract_created", {}), "created");
  assert.equal(lastAction("inputs_applied", { inputs: [dep] }), "alice deposited 100 ADA");
  assert.equal(lastAction("inputs_applied", { inputs: [choice], closed: true }), "bob chose 3 for “price”; closed");
  assert.equal(lastAction("inputs_applied", { inputs: ["input_notify", dep, dep] }), "notified and 2 more inputs");
  assert.equal(lastAction("inputs_applied", { inputs: [] }), "a deadline passed");
  assert.equal(lastAction("payout_withdrawn", {}), "payouts withdrawn");
  assert.equal(lastAction("apply_inputs_rejected", {}), "a step that could not be read");
});
