// The shared worker that holds the browser's one event stream for every
// tab of the explorer (hub.js connects to it): a browser opens at most six
// connections to a host, and a stream per tab would use them up. Every
// message of the relay goes to every tab; a tab that joins is told the
// position from which it gets every record. It also keeps what the
// contracts list shows of its rows (rowinfo.js), asked once for all tabs.

import { hold } from "./hub.js";

const ports = new Set();
let held = null;

self.addEventListener("connect", (ev) => {
  const port = ev.ports[0];
  ports.add(port);
  port.addEventListener("message", (m) => {
    const type = m.data && m.data.type;
    if (type === "bye") ports.delete(port); // the tab is going away (or into the back-forward cache)
    if (type === "join") {
      // It came back from the back-forward cache.
      ports.add(port);
      port.postMessage(held.hello());
    }
    if (type === "want") held.handle(m.data);
  });
  port.start();
  if (!held) {
    held = hold({
      send: (msg) => {
        for (const p of ports) p.postMessage(msg);
      },
    });
  }
  port.postMessage(held.hello());
});
