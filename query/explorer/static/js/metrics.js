// The Prometheus text format of GET /metrics, read into numbers, and the
// rates the status page charts (blocks/s, records/s) from two readings.

/**
 * parseMetrics reads Prometheus text exposition into a Map from series
 * ("name" or "name{label=\"v\",...}" as written) to its value, and sums by
 * metric name in .totals.
 */
export function parseMetrics(text) {
  const series = new Map();
  const totals = new Map();
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    let name;
    let rest;
    const brace = line.indexOf("{");
    const space = line.indexOf(" ");
    if (brace >= 0 && (space < 0 || brace < space)) {
      const close = line.indexOf("}", brace);
      if (close < 0) continue;
      name = line.slice(0, brace);
      rest = line.slice(close + 1).trim();
      series.set(line.slice(0, close + 1), num(rest));
    } else {
      if (space < 0) continue;
      name = line.slice(0, space);
      rest = line.slice(space + 1).trim();
      series.set(name, num(rest));
    }
    const v = num(rest);
    totals.set(name, (totals.get(name) || 0) + (Number.isFinite(v) ? v : 0));
  }
  return { series, totals, get: (name) => totals.get(name) };
}

function num(s) {
  const v = s.split(/\s+/)[0];
  if (v === "+Inf") return Infinity;
  if (v === "-Inf") return -Infinity;
  return Number(v);
}

/** rate is the per-second increase of a counter between two readings ({at: ms, metrics}). */
export function rate(prev, cur, name) {
  if (!prev || !cur) return null;
  const dt = (cur.at - prev.at) / 1000;
  const a = prev.metrics.get(name);
  const b = cur.metrics.get(name);
  if (!(dt > 0) || a === undefined || b === undefined) return null;
  return Math.max(0, (b - a) / dt); // a restart resets counters: no negative rates
}

/** eta is the time (s) to catch up blocksBehind at a rate of blocks/s, or null. */
export function eta(blocksBehind, blocksPerSecond, tipBlocksPerSecond = 0) {
  const gain = blocksPerSecond - tipBlocksPerSecond;
  if (!(blocksBehind > 0) || !(gain > 0)) return null;
  return blocksBehind / gain;
}
