// What the contracts list shows of its rows beyond the list (rowinfo.js):
// read once, the fewest reads, kept current by the stream's records, and
// forgotten by a rollback that undid them.
import test from "node:test";
import assert from "node:assert/strict";
import { RowInfo } from "../static/js/rowinfo.js";

const ada = (n) => ({ lovelace: n, tokens: {} });
const dep = { input_from_party: { role_token: "a" }, into_account: { role_token: "a" }, of_token: { currency_symbol: "", token_name: "" }, that_deposits: 5000000 };

// api answers the reads a RowInfo makes, and counts them.
function api(contracts) {
  const reads = [];
  const getImpl = async (path) => {
    reads.push(path);
    const m = /^contracts\/([^/]+)(\/transactions(?:\/(.+))?)?$/.exec(path);
    const c = contracts[decodeURIComponent(m[1])];
    if (!m[2]) return c.full;
    if (!m[3]) return { results: c.txs.map((t) => ({ transactionId: t.id, seq: t.seq })), cursor: null };
    return c.txs.find((t) => t.id === m[3]).detail;
  };
  return { reads, getImpl };
}

const settle = () => new Promise((r) => setTimeout(r, 0)).then(() => new Promise((r) => setTimeout(r, 0)));

test("a contract that never stepped: one read, its value and its creation", async () => {
  const { reads, getImpl } = api({ "c#0": { full: { lastSeq: 5, steps: 0, tags: {}, assets: ada(2000000), initialContract: "close" }, txs: [] } });
  const sent = [];
  const ri = new RowInfo({ send: (m) => sent.push(m), getImpl });
  ri.want([{ contractId: "c#0", seq: 5, lastSeq: 5, steps: 0, tags: {} }]);
  for (let i = 0; i < 5; i++) await settle();
  assert.equal(reads.length, 1);
  const last = sent[sent.length - 1].info;
  assert.deepEqual([last.type.type, last.assetsSeq, last.action, last.actionSeq], ["Empty", 5, "created with 2 ADA", 5]);
  // Asked again at the same seq: answered without a read.
  ri.want([{ contractId: "c#0", seq: 5, lastSeq: 5, steps: 0, tags: {} }]);
  assert.equal(reads.length, 1);
  assert.equal(sent.length, 2);
});

test("a tagged contract that stepped: its newest step alone gives value and action", async () => {
  const { reads, getImpl } = api({ "c#0": { full: null, txs: [
    { id: "t1", seq: 7, detail: { seq: 7, kind: "applied", details: { inputs: [], output: { assets: ada(1) } } } },
    { id: "t2", seq: 9, detail: { seq: 9, kind: "applied", details: { inputs: [dep], output: { assets: ada(7000000) } } } },
  ] } });
  const sent = [];
  const ri = new RowInfo({ send: (m) => sent.push(m), getImpl });
  ri.want([{ contractId: "c#0", seq: 3, lastSeq: 9, steps: 2, tags: { escrow: null } }]);
  for (let i = 0; i < 5; i++) await settle();
  assert.deepEqual(reads, ["contracts/c%230/transactions", "contracts/c%230/transactions/t2"]);
  const last = sent[sent.length - 1].info;
  assert.deepEqual([last.type.type, last.assets.lovelace, last.action, last.closedSeq], ["Escrow", 7000000, "a deposited 5 ADA", undefined]);
});

test("the stream's records tell value and action without a read; a rollback forgets what it undid", async () => {
  const { reads, getImpl } = api({});
  const sent = [];
  const ri = new RowInfo({ send: (m) => sent.push(m), getImpl });
  ri.note({ seq: 10, kind: "contract_created", contractId: "c#0", block: { slot: 100 }, payload: { tags: {}, assets: ada(3000000), datum: { marloweContract: "close" } } });
  ri.want([{ contractId: "c#0", seq: 10, lastSeq: 10, steps: 0, tags: {} }]);
  assert.equal(reads.length, 0);
  assert.equal(sent.at(-1).info.action, "created with 3 ADA");
  ri.note({ seq: 12, kind: "inputs_applied", contractId: "c#0", block: { slot: 120 }, payload: { inputs: [dep], closed: true } });
  assert.deepEqual([sent.at(-1).info.actionSeq, sent.at(-1).info.assets.lovelace, sent.at(-1).info.action, sent.at(-1).info.closedSeq], [12, 0, "a deposited 5 ADA; closed", 12]);
  // A row a moment behind the stream is answered with the newer state.
  ri.want([{ contractId: "c#0", seq: 10, lastSeq: 10, steps: 0, tags: {} }]);
  assert.equal(reads.length, 0);
  // The rollback to slot 110 undid the step: its value and action are forgotten (the type stays).
  ri.note({ seq: 13, kind: "rolled_back", block: { slot: 110 }, payload: { to: { slot: 110 } } });
  assert.deepEqual(Object.keys(sent.at(-1).info), ["type"]);
  // A record of a contract no tab asked for is kept, not told.
  const n = sent.length;
  ri.note({ seq: 14, kind: "contract_created", contractId: "d#0", block: { slot: 130 }, payload: { tags: {}, assets: ada(1), datum: { marloweContract: "close" } } });
  assert.equal(sent.length, n);
  ri.want([{ contractId: "d#0", seq: 14, lastSeq: 14, steps: 0, tags: {} }]);
  assert.equal(sent.length, n + 1);
});

test("a read that fails is told as failed", async () => {
  const ri = new RowInfo({ send: (m) => sent.push(m), getImpl: async () => { throw new Error("503"); } });
  const sent = [];
  ri.want([{ contractId: "c#0", seq: 1, lastSeq: 1, steps: 0, tags: {} }]);
  for (let i = 0; i < 5; i++) await settle();
  assert.equal(sent.at(-1).failed, true);
});
