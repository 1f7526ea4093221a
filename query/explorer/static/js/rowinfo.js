// What the contracts list shows of each row beyond GET /contracts: its
// type (from its tags, or else its shape), the value locked and its last
// action in words, as of the contract's lastSeq. It is kept where the
// browser's one event stream is (the shared worker, or the leader tab), so
// that every tab asks once and the stream's records keep it current: a
// record tells its contract's new value and last action without a read.
// No DOM.

import { contractPath, get } from "./api.js";
import { shapeType, tagType } from "./types.js";
import { lastAction } from "./words.js";

const MAX = 5000; // contracts kept
const PARALLEL = 2; // reads at once: a browser opens six connections to a host for all its tabs together, the stream holds one, and the tabs need the rest

/**
 * RowInfo answers {type: "info", id, info: {type, assets, assetsSeq,
 * action, actionSeq}} through send, for the rows asked (want) and the
 * records noted (note). getImpl reads the API (api.js's get).
 */
export class RowInfo {
  constructor({ send, getImpl = get }) {
    this.send = send;
    this.get = getImpl;
    this.info = new Map();
    this.queue = [];
    this.queued = new Map(); // id -> the row asked last
    this.running = 0;
    this.asked = new Set(); // the contracts a tab asked for: records of others are kept, not told
  }

  set(id, patch) {
    const inf = { ...(this.info.get(id) || {}), ...patch };
    this.info.delete(id);
    this.info.set(id, inf); // (the map in order of use: the oldest go first)
    if (this.info.size > MAX) this.info.delete(this.info.keys().next().value);
    if (this.asked.has(id)) this.send({ type: "info", id, info: inf });
  }

  /** want asks for rows: {contractId, seq, lastSeq, steps, tags}; onlyType when the type alone is needed (a scan by type). */
  want(rows, { onlyType = false } = {}) {
    for (const c of rows) {
      this.asked.delete(c.contractId);
      this.asked.add(c.contractId);
      if (this.asked.size > MAX) this.asked.delete(this.asked.values().next().value);
      const inf = this.info.get(c.contractId);
      const fresh = inf && inf.type && (onlyType || ((inf.assetsSeq ?? -1) >= c.lastSeq && (inf.actionSeq ?? -1) >= c.lastSeq));
      if (fresh) {
        this.send({ type: "info", id: c.contractId, info: inf });
        continue;
      }
      if (!inf || !inf.type) {
        const t = tagType(c.tags);
        if (t) {
          this.set(c.contractId, { type: t });
          if (onlyType) continue;
        }
      }
      const q = this.queued.get(c.contractId);
      if (q) {
        if (!onlyType) q.onlyType = false;
        q.row = c;
        continue;
      }
      const job = { row: c, onlyType };
      this.queued.set(c.contractId, job);
      this.queue.push(job);
    }
    this.pump();
  }

  pump() {
    while (this.running < PARALLEL && this.queue.length) {
      const job = this.queue.shift();
      this.running++;
      this.read(job).catch(() => {
        this.send({ type: "info", id: job.row.contractId, info: this.info.get(job.row.contractId) || {}, failed: true });
      }).finally(() => {
        this.running--;
        this.queued.delete(job.row.contractId);
        this.pump();
      });
    }
  }

  // read reads what a row lacks, in as few reads as it can: a contract
  // that never stepped, its contract (value, shape, creation); one that
  // did, its newest step (value after it, last action), and its contract
  // only for a shape (no tag names its type) or when its newest record is
  // not a step (a withdrawal).
  async read({ row: c, onlyType }) {
    const inf = this.info.get(c.contractId) || {};
    const patch = {};
    const needType = !inf.type;
    const needState = !onlyType && !((inf.assetsSeq ?? -1) >= c.lastSeq && (inf.actionSeq ?? -1) >= c.lastSeq);
    let step = null;
    if (needState && c.steps > 0) {
      step = await this.lastStep(c);
      if (step && step.seq === c.lastSeq) {
        const d = step.details || {};
        patch.action = lastAction(step.kind === "rejected" ? "apply_inputs_rejected" : "inputs_applied", d);
        patch.actionSeq = c.lastSeq;
        if (step.kind !== "rejected") Object.assign(patch, { assets: d.closed || !d.output ? { lovelace: 0, tokens: {} } : d.output.assets, assetsSeq: c.lastSeq, ...(d.closed ? { closedSeq: c.lastSeq } : {}) });
      } else if (step && step.seq < c.lastSeq) {
        Object.assign(patch, { action: lastAction("payout_withdrawn"), actionSeq: c.lastSeq });
      }
    }
    if (needType || (needState && patch.assetsSeq === undefined)) {
      const full = await this.get(contractPath(c.contractId), { minSeq: c.lastSeq });
      if (full.lastSeq === c.lastSeq) Object.assign(patch, { assets: full.assets, assetsSeq: full.lastSeq });
      if (needType) patch.type = tagType(full.tags) || shapeType(full.initialContract);
      if (needState && c.steps === 0 && c.lastSeq === c.seq && full.lastSeq === c.lastSeq) {
        Object.assign(patch, { action: lastAction("contract_created", { assets: full.assets }), actionSeq: c.lastSeq });
      }
    }
    this.set(c.contractId, patch);
  }

  // lastStep reads the contract's newest step (the last of its
  // transactions) with its details; null when it has none.
  async lastStep(c) {
    let last = null;
    for (let cursor = "", n = 0; n < 20; n++) {
      const page = await this.get(contractPath(c.contractId, "/transactions"), { limit: 1000, cursor, minSeq: c.lastSeq });
      if (page.results.length) last = page.results[page.results.length - 1];
      if (!page.cursor) break;
      cursor = page.cursor;
    }
    if (!last) return null;
    return this.get(contractPath(c.contractId, "/transactions/" + last.transactionId));
  }

  /**
   * note takes what a record of the event stream tells of its contract; a
   * rollback forgets the values and actions told by the records it undid
   * (their slots are after the point it goes back to), so that they are
   * read again.
   */
  note(r) {
    if (r.kind === "rolled_back") {
      const to = Number(r.payload && r.payload.to ? r.payload.to.slot ?? 0 : 0);
      for (const [id, inf] of this.info) {
        if (inf.slot !== undefined && inf.slot > to) {
          const { type } = inf;
          this.info.delete(id);
          if (type) this.set(id, { type });
          else if (this.asked.has(id)) this.send({ type: "info", id, info: {} });
        }
      }
      return;
    }
    if (!r.contractId) return;
    const p = r.payload || {};
    const slot = r.block ? Number(r.block.slot) : undefined;
    if (r.kind === "contract_created") {
      const contract = p.datum && p.datum.marloweContract;
      const type = tagType(p.tags) || (contract !== undefined ? shapeType(contract) : undefined);
      this.set(r.contractId, { ...(type ? { type } : {}), assets: p.assets, assetsSeq: r.seq, action: lastAction(r.kind, p), actionSeq: r.seq, slot });
    } else if (r.kind === "inputs_applied") {
      // (closedSeq: the step that closed it, for a row read before it.)
      this.set(r.contractId, { assets: p.closed || !p.output ? { lovelace: 0, tokens: {} } : p.output.assets, assetsSeq: r.seq, action: lastAction(r.kind, p), actionSeq: r.seq, slot, ...(p.closed ? { closedSeq: r.seq } : {}) });
    } else if (this.info.has(r.contractId)) {
      // A withdrawal leaves the contract's output as it was; a rejected step too.
      const inf = this.info.get(r.contractId);
      this.set(r.contractId, { action: lastAction(r.kind, p), actionSeq: r.seq, slot, ...(inf.assets !== undefined ? { assetsSeq: r.seq } : {}) });
    }
  }
}
