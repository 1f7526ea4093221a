// The browser's one event stream (stream.js): its states, cursors and
// positions, with a fake EventSource and a fake clock.
import test from "node:test";
import assert from "node:assert/strict";
import { EventStream, Relay, STALL_MS } from "../static/js/stream.js";

const BASE = new URL("http://127.0.0.1:3780/");

// fake: a clock and timers run by hand, and EventSources that record their URL.
function fake() {
  let now = 0;
  let id = 0;
  const timers = new Map();
  const sources = [];
  class FakeES {
    constructor(url) {
      this.url = new URL(url);
      this.readyState = 0;
      this.listeners = {};
      this.closed = false;
      sources.push(this);
    }
    addEventListener(type, fn) {
      (this.listeners[type] ||= []).push(fn);
    }
    fire(type, ev = {}) {
      if (type === "open") this.readyState = 1;
      for (const fn of this.listeners[type] || []) fn(ev);
    }
    close() {
      this.closed = true;
      this.readyState = 2;
    }
  }
  const t = {
    setInterval: (fn, ms) => (timers.set(++id, { fn, at: now + ms, every: ms }), id),
    clearInterval: (i) => timers.delete(i),
    setTimeout: (fn, ms) => (timers.set(++id, { fn, at: now + ms }), id),
    clearTimeout: (i) => timers.delete(i),
  };
  const advance = (ms) => {
    const end = now + ms;
    for (;;) {
      let next = null;
      for (const [k, x] of timers) if (x.at <= end && (next === null || x.at < timers.get(next).at)) next = k;
      if (next === null) break;
      const x = timers.get(next);
      now = x.at;
      if (x.every) x.at += x.every;
      else timers.delete(next);
      x.fn();
    }
    now = end;
  };
  return { FakeES, sources, timers: t, now: () => now, advance };
}

// watched: an EventStream from `from` on a fake, and the states it emits.
function watched(from) {
  const f = fake();
  const states = [];
  const s = new EventStream({ base: BASE, from, emit: (m) => m.type === "state" && states.push(m.state), EventSourceImpl: f.FakeES, now: f.now, timers: f.timers });
  return { f, states, s };
}

const record = (seq, extra = {}) => ({ lastEventId: String(seq), data: JSON.stringify({ seq, kind: "inputs_applied", contractId: "c#0", ...extra }) });

test("a stream from a cursor: live, records move the cursor, heartbeats the seq", () => {
  const f = fake();
  const got = [];
  const s = new EventStream({ base: BASE, from: 41, emit: (m) => got.push(m), EventSourceImpl: f.FakeES, now: f.now, timers: f.timers });
  assert.equal(f.sources.length, 1);
  assert.equal(f.sources[0].url.searchParams.get("from"), "41");
  assert.equal(f.sources[0].url.searchParams.get("all"), "true");
  assert.equal(s.state, "connecting");
  f.sources[0].fire("open");
  assert.equal(s.state, "live");
  f.sources[0].fire("record", record(42));
  assert.equal(s.cursor, "42");
  assert.equal(s.seq, 42);
  f.sources[0].fire("heartbeat", { data: JSON.stringify({ slot: 9, blockNo: 3, hash: "ab", seq: 45 }) });
  assert.equal(s.seq, 45);
  assert.deepEqual(got.map((m) => m.type), ["state", "state", "record", "tip"]);
  assert.equal(got[2].record.seq, 42);
  // An unreadable record is skipped, the stream goes on.
  f.sources[0].fire("record", { lastEventId: "46", data: "{not json" });
  assert.equal(got.length, 4);
  s.close();
  assert.ok(f.sources[0].closed);
});

test("a drop: reconnecting, then resumed (EventSource resumes by itself with Last-Event-ID)", () => {
  const { f, states, s } = watched("tip");
  assert.equal(f.sources[0].url.searchParams.get("from"), "tip");
  f.sources[0].fire("open");
  f.sources[0].fire("record", record(7));
  f.sources[0].readyState = 0; // CONNECTING: the browser retries
  f.sources[0].fire("error");
  f.sources[0].fire("open");
  assert.deepEqual(states, ["connecting", "live", "reconnecting", "resumed"]);
  assert.equal(f.sources.length, 1);
  s.close();
});

test("a refusal: failed, then restarted from the tip after a pause", () => {
  const { f, states, s } = watched(10);
  f.sources[0].fire("open");
  f.sources[0].readyState = 2; // CLOSED: the server answered with an error
  f.sources[0].fire("error");
  assert.equal(s.state, "failed");
  f.advance(999);
  assert.equal(f.sources.length, 1);
  f.advance(1);
  assert.equal(f.sources.length, 2);
  assert.equal(f.sources[1].url.searchParams.get("from"), "tip");
  f.sources[1].fire("open");
  assert.deepEqual(states, ["connecting", "live", "failed", "reconnecting", "restarted"]);
  // Events of the old source no longer count.
  f.sources[0].fire("record", record(99));
  assert.equal(s.seq, 10);
  s.close();
});

test("silence: stalled after STALL_MS, opened again from the last cursor, then resumed", () => {
  const { f, states, s } = watched(5);
  f.sources[0].fire("open");
  f.advance(STALL_MS - 1000);
  f.sources[0].fire("heartbeat", { data: JSON.stringify({ slot: 1, blockNo: 1, hash: "00", seq: 6 }) });
  f.sources[0].fire("record", record(8));
  f.advance(STALL_MS - 1000);
  assert.equal(s.state, "live", "heard within STALL_MS");
  f.advance(1000);
  assert.equal(s.state, "stalled");
  assert.ok(f.sources[0].closed);
  assert.equal(f.sources.length, 2);
  assert.equal(f.sources[1].url.searchParams.get("from"), "8");
  f.sources[1].fire("open");
  assert.deepEqual(states, ["connecting", "live", "stalled", "resumed"]);
  // A stalled reopen that hangs is tried again after another STALL_MS.
  f.advance(STALL_MS);
  assert.equal(f.sources.length, 3);
  s.close();
});

test("the relay starts at the history's head, so a joining tab knows its position", async () => {
  const f = fake();
  const sent = [];
  const fetchImpl = async (u) => {
    assert.equal(String(u), "http://127.0.0.1:3780/status");
    return { ok: true, json: async () => ({ historySeq: 1207 }) };
  };
  const r = new Relay({ base: BASE, send: (m) => sent.push(m), EventSourceImpl: f.FakeES, fetchImpl, now: f.now, timers: f.timers });
  assert.equal(r.hello().seq, null);
  await new Promise((res) => setImmediate(res));
  assert.equal(f.sources[0].url.searchParams.get("from"), "1207");
  const hello = sent.find((m) => m.type === "hello");
  assert.equal(hello.seq, 1207);
  f.sources[0].fire("open");
  f.sources[0].fire("record", record(1208));
  assert.equal(r.hello().seq, 1208);
  assert.equal(r.hello().state, "live");
  r.close();
});

test("a relay taking over goes on from the seq it was told, and says resumed", () => {
  const f = fake();
  const sent = [];
  const r = new Relay({ base: BASE, from: 300, send: (m) => sent.push(m), EventSourceImpl: f.FakeES, fetchImpl: () => assert.fail("no /status"), now: f.now, timers: f.timers });
  assert.equal(f.sources[0].url.searchParams.get("from"), "300");
  f.sources[0].fire("open");
  assert.equal(r.hello().state, "resumed");
  assert.equal(sent.find((m) => m.type === "hello").seq, 300);
  r.close();
});

test("without /status the relay starts from the tip, its position unknown until told", async () => {
  const f = fake();
  const r = new Relay({ base: BASE, send: () => {}, EventSourceImpl: f.FakeES, fetchImpl: async () => ({ ok: false }), now: f.now, timers: f.timers });
  await new Promise((res) => setImmediate(res));
  assert.equal(f.sources[0].url.searchParams.get("from"), "tip");
  assert.equal(r.hello().seq, null);
  f.sources[0].fire("heartbeat", { data: JSON.stringify({ slot: 1, blockNo: 1, hash: "00", seq: 77 }) });
  assert.equal(r.hello().seq, 77);
  r.close();
});
