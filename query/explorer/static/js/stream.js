// One event stream: GET /events?all=true from a cursor, with its state for
// people. No DOM: it runs in the shared worker (events-worker.js), in a
// leader tab (hub.js) and in the unit tests (with a fake EventSource and
// clock).
//
// States: "connecting" (first open), "live", "reconnecting" (the stream
// dropped; EventSource comes back with Last-Event-ID), "resumed" (it came
// back after a drop: nothing missed), "stalled" (nothing, not even a
// heartbeat, for STALL_MS: the connection is dropped and opened again
// from the last cursor), "failed" (the server refused the stream),
// "restarted" (opened again from the tip after a refusal: whoever shows
// records must read everything afresh).

import { parse } from "./json.js";

/** HEARTBEAT_MS is the server's heartbeat interval (docs/streaming.md). */
export const HEARTBEAT_MS = 10000;
/** STALL_MS: with no record and no heartbeat for this long, the stream is stalled. */
export const STALL_MS = 25000;

/**
 * EventStream follows /events. emit gets {type: "record", record},
 * {type: "tip", tip} (a heartbeat's) and {type: "state", state, cursor,
 * since}. base is the API's base URL. from is where to start: a cursor
 * (a seq) or "tip".
 */
export class EventStream {
  constructor({ base, from = "tip", emit, EventSourceImpl = globalThis.EventSource, now = () => Date.now(), timers = globalThis }) {
    this.base = base;
    this.emit = emit;
    this.ES = EventSourceImpl;
    this.now = now;
    this.timers = timers;
    this.cursor = from === "tip" ? null : String(from);
    this.seq = from === "tip" ? null : Number(from); // the newest seq told (records and heartbeats)
    this.tip = null;
    this.state = "";
    this.dropped = false;
    this.restarting = false;
    this.retries = 0;
    this.closed = false;
    this.heardAt = now();
    this.watch = timers.setInterval(() => this.check(), 1000);
    this.open("connecting");
  }

  url() {
    const u = new URL("events", this.base);
    u.searchParams.set("all", "true");
    u.searchParams.set("from", this.cursor === null ? "tip" : this.cursor);
    return u.toString();
  }

  setState(state) {
    this.state = state;
    this.stateSince = this.now();
    this.emit({ type: "state", state, cursor: this.cursor, since: this.stateSince });
  }

  // open opens the EventSource from the cursor; state, when given, is
  // the state until it opens.
  open(state) {
    if (state) this.setState(state);
    const es = new this.ES(this.url());
    this.es = es;
    this.heardAt = this.now();
    es.addEventListener("open", () => {
      if (es !== this.es) return;
      this.retries = 0;
      this.heardAt = this.now();
      const state = this.restarting ? "restarted" : this.dropped ? "resumed" : "live";
      this.restarting = this.dropped = false;
      this.setState(state);
    });
    es.addEventListener("record", (ev) => {
      if (es !== this.es) return;
      this.heardAt = this.now();
      if (ev.lastEventId) this.cursor = ev.lastEventId;
      let rec;
      try {
        rec = parse(ev.data);
      } catch {
        return; // a record this page cannot read is skipped
      }
      if (typeof rec.seq === "number") this.seq = Math.max(this.seq ?? 0, rec.seq);
      if (this.state === "stalled") this.setState("live");
      this.emit({ type: "record", record: rec });
    });
    es.addEventListener("heartbeat", (ev) => {
      if (es !== this.es) return;
      this.heardAt = this.now();
      let tip;
      try {
        tip = parse(ev.data);
      } catch {
        return;
      }
      this.tip = tip;
      if (typeof tip.seq === "number") this.seq = Math.max(this.seq ?? 0, tip.seq);
      if (this.state === "stalled") this.setState("live");
      this.emit({ type: "tip", tip });
    });
    es.addEventListener("error", () => {
      if (es !== this.es || this.closed) return;
      this.dropped = true;
      if (es.readyState === 2 /* CLOSED */) {
        // The server answered with an error, or the browser gave up:
        // start again from the tip after a pause.
        this.setState("failed");
        const wait = Math.min(30000, 1000 * 2 ** this.retries++);
        this.timers.setTimeout(() => {
          if (this.closed || es !== this.es) return;
          this.restarting = true;
          this.dropped = false;
          this.cursor = null;
          this.open("reconnecting");
        }, wait);
      } else {
        this.setState("reconnecting");
      }
    });
  }

  // check runs every second: a stream silent for STALL_MS (no record, no
  // heartbeat: a connection dead without a word, or a server that stopped
  // sending) is stalled; it is opened again from the last cursor.
  check() {
    if (this.closed || this.state === "failed") return;
    if (this.now() - this.heardAt < STALL_MS) return;
    this.setState("stalled");
    this.es.close();
    this.dropped = true;
    this.open(null); // "stalled" until it opens ("resumed")
  }

  close() {
    this.closed = true;
    this.timers.clearInterval(this.watch);
    if (this.es) this.es.close();
  }
}

/**
 * Relay is the one stream of a browser, told to every tab: it starts from
 * the history's head (GET /status, so that its position is known from the
 * start) or from a seq (a tab taking over from a leader that left), and
 * sends every message to all (send). hello() is what a tab that joins is
 * told: the position from which it will be told every record (seq), the
 * state and the last tip. A hello is sent to all again once the start
 * position is known.
 */
export class Relay {
  constructor({ base, from = null, send, EventSourceImpl, fetchImpl = globalThis.fetch, now, timers }) {
    this.send = send;
    this.stream = null;
    this.closed = false;
    const start = (seq, resumed) => {
      if (this.closed) return;
      this.stream = new EventStream({ base, from: seq === null ? "tip" : seq, emit: (m) => this.send(m), EventSourceImpl, now, timers });
      if (resumed) this.stream.dropped = true; // its open says "resumed"
      this.send(this.hello());
    };
    if (from !== null && from !== undefined) {
      start(Number(from), true);
      return;
    }
    this.send({ type: "state", state: "connecting" });
    fetchImpl(new URL("status", base), { headers: { Accept: "application/json" } })
      .then((res) => (res.ok ? res.json() : null))
      .then((st) => start(st && Number.isSafeInteger(st.historySeq) ? st.historySeq : null, false))
      .catch(() => start(null, false));
  }

  hello() {
    const s = this.stream;
    return { type: "hello", seq: s ? s.seq : null, state: s ? s.state : "connecting", since: s ? s.stateSince : undefined, cursor: s ? s.cursor : null, tip: s ? s.tip : null };
  }

  close() {
    this.closed = true;
    if (this.stream) this.stream.close();
  }
}
