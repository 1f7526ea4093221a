// The tab's side of the browser's one event stream. Every tab of the
// explorer is told the same records by one stream (stream.js's Relay):
// held by a shared worker (events-worker.js) where the browser has
// SharedWorker; elsewhere by one tab, the leader, elected with a Web Lock
// and heard by the others over a BroadcastChannel (when the leader closes,
// the next tab takes the lock and goes on from the last seq it was told:
// nothing is missed); and where neither exists, by the tab itself.
//
// connect(onMessage) delivers the relay's messages: hello (the position
// from which this tab is told every record), state, record, tip. When the
// relay itself goes silent (no message for longer than a heartbeat
// allows), the tab is told "stalled".

import { RowInfo } from "./rowinfo.js";
import { Relay, STALL_MS } from "./stream.js";

const NAME = "marlowe-follower-events/1"; // the protocol's version: a new one gets a worker of its own
const BASE = new URL("../../", import.meta.url);

/**
 * hold starts the browser's one stream where it is held (the shared
 * worker, the leader tab, or a tab on its own): the relay, and the rows'
 * information it keeps current (rowinfo.js). send tells every tab;
 * handle takes a tab's request ({type: "want", rows, onlyType}).
 */
export function hold({ base = BASE, from = null, send }) {
  const rows = new RowInfo({ send });
  const relay = new Relay({
    base,
    from,
    send: (m) => {
      if (m.type === "record") rows.note(m.record);
      send(m);
    },
  });
  return {
    relay,
    hello: () => relay.hello(),
    handle: (m) => {
      if (m && m.type === "want" && Array.isArray(m.rows)) rows.want(m.rows, { onlyType: Boolean(m.onlyType) });
    },
    close: () => relay.close(),
  };
}

/**
 * connect picks how this tab hears the stream and returns {mode, close}:
 * mode is "shared" (the worker), "leader" or "follower" (it changes when
 * a follower takes over), or "local".
 */
export function connect(onMessage, { prefer } = {}) {
  const hub = { mode: "", close: () => {}, ask: () => {}, heardAt: Date.now() };
  const deliver = (m) => {
    hub.heardAt = Date.now();
    onMessage(m);
  };
  const silent = setInterval(() => {
    if (Date.now() - hub.heardAt > STALL_MS + 5000) {
      hub.heardAt = Date.now();
      onMessage({ type: "state", state: "stalled", silent: true });
    }
  }, 1000);
  const stop = hub.close;
  const done = (close) => {
    hub.close = () => {
      clearInterval(silent);
      close();
      stop();
    };
  };
  const mode = prefer || (typeof SharedWorker === "function" ? "shared" : globalThis.navigator && navigator.locks && typeof BroadcastChannel === "function" ? "leader" : "local");
  if (mode === "shared") {
    let heard = false;
    let worker;
    try {
      worker = new SharedWorker(new URL("./events-worker.js", import.meta.url), { type: "module", name: NAME });
    } catch {
      return connect(onMessage, { prefer: "leader" });
    }
    hub.mode = "shared";
    document.documentElement.dataset.liveMode = "shared";
    worker.port.addEventListener("message", (ev) => {
      heard = true;
      deliver(ev.data);
    });
    worker.addEventListener("error", () => {
      if (heard) return;
      // The worker did not start: this tab follows another way.
      clearInterval(silent);
      const other = connect(onMessage, { prefer: "leader" });
      Object.assign(hub, { mode: other.mode, close: other.close });
    });
    worker.port.start();
    hub.ask = (m) => worker.port.postMessage(m);
    const bye = () => worker.port.postMessage({ type: "bye" });
    addEventListener("pagehide", bye);
    addEventListener("pageshow", (ev) => {
      if (ev.persisted) worker.port.postMessage({ type: "join" }); // back from the back-forward cache
    });
    done(() => {
      bye();
      worker.port.close();
    });
    return hub;
  }
  // A tab back from the back-forward cache has missed what was said
  // meanwhile and may have lost its place: it starts again.
  addEventListener("pageshow", (ev) => {
    if (ev.persisted) location.reload();
  });
  if (mode === "leader" && globalThis.navigator && navigator.locks && typeof BroadcastChannel === "function") {
    follower(hub, deliver, done);
    return hub;
  }
  hub.mode = "local";
  document.documentElement.dataset.liveMode = "local";
  const held = hold({ send: deliver });
  hub.ask = (m) => held.handle(m);
  done(() => held.close());
  return hub;
}

// follower hears the leader over the channel and waits for the lock; once
// it has it (the leader left, or there was none), it is the leader.
function follower(hub, deliver, done) {
  const channel = new BroadcastChannel(NAME);
  let held = null;
  let seq = null; // the newest seq told: where a new leader starts
  const note = (m) => {
    const s = m.type === "record" ? m.record.seq : m.type === "tip" ? m.tip.seq : m.seq;
    if (typeof s === "number") seq = Math.max(seq ?? 0, s);
  };
  hub.mode = "follower";
  document.documentElement.dataset.liveMode = "follower";
  hub.ask = (m) => (held ? held.handle(m) : channel.postMessage(m));
  channel.addEventListener("message", (ev) => {
    const m = ev.data;
    if (!m || typeof m !== "object") return;
    if (m.type === "hello?") {
      if (held) channel.postMessage(held.hello());
      return;
    }
    if (m.type === "want") {
      if (held) held.handle(m);
      return;
    }
    if (held) return; // (another leader's, gone by now)
    note(m);
    deliver(m);
  });
  channel.postMessage({ type: "hello?" });
  let release;
  const lock = new Promise((r) => (release = r));
  navigator.locks.request(NAME, () => {
    if (hub.closed) return undefined;
    hub.mode = "leader";
    document.documentElement.dataset.liveMode = "leader";
    held = hold({
      from: seq,
      send: (m) => {
        channel.postMessage(m);
        deliver(m);
      },
    });
    return lock; // the lock is held until this tab goes away
  });
  done(() => {
    hub.closed = true;
    if (held) held.close();
    release();
    channel.close();
  });
}
