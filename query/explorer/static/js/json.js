// Lossless JSON for Marlowe values. Marlowe integers are unbounded (a
// choice can be 10^45, a lovelace amount above 2^53), and JSON.parse turns
// them into rounded doubles. parse() reads integers outside the safe range
// as BigInt and everything else as JSON.parse does; stringify() and
// canonical() write BigInts back as plain integers.

const SAFE = BigInt(Number.MAX_SAFE_INTEGER);

// A number of 16 digits or more after ':', '[' or ',': text without one
// has no integer JSON.parse would round (inside strings such a sequence
// only costs the slow path).
const LONG = /(^|[:[,])\s*-?\d{16}/;

/** parse reads JSON text; integers beyond ±(2^53-1) become BigInt. */
export function parse(text) {
  if (!LONG.test(text)) return JSON.parse(text);
  return parseExact(text);
}

function parseExact(text) {
  let i = 0;
  const n = text.length;
  const fail = (what) => {
    throw new SyntaxError(`JSON: ${what} at offset ${i}`);
  };
  const ws = () => {
    for (;;) {
      const c = text.charCodeAt(i);
      if (c === 32 || c === 10 || c === 13 || c === 9) i++;
      else return;
    }
  };
  // another steps over what follows a member of an object or array: true
  // after ',' (another member follows), false after its closing bracket.
  const another = (close) => {
    ws();
    const c = text[i];
    if (c !== "," && c !== close) fail(`expected ',' or '${close}'`);
    i++;
    return c === ",";
  };
  const value = () => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const obj = {};
      ws();
      if (text[i] === "}") {
        i++;
        return obj;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail("expected a key");
        const k = string();
        ws();
        if (text[i] !== ":") fail("expected ':'");
        i++;
        const v = value();
        if (k === "__proto__") Object.defineProperty(obj, k, { value: v, enumerable: true, writable: true, configurable: true });
        else obj[k] = v;
        if (!another("}")) return obj;
      }
    }
    if (c === "[") {
      i++;
      const arr = [];
      ws();
      if (text[i] === "]") {
        i++;
        return arr;
      }
      for (;;) {
        arr.push(value());
        if (!another("]")) return arr;
      }
    }
    if (c === '"') return string();
    if (c === "-" || (c >= "0" && c <= "9")) return number();
    if (text.startsWith("true", i)) {
      i += 4;
      return true;
    }
    if (text.startsWith("false", i)) {
      i += 5;
      return false;
    }
    if (text.startsWith("null", i)) {
      i += 4;
      return null;
    }
    return fail(i >= n ? "unexpected end" : "unexpected character");
  };
  const string = () => {
    // Fast path: no escapes.
    const start = ++i;
    const end = text.indexOf('"', start);
    if (end < 0) fail("unterminated string");
    const slash = text.indexOf("\\", start);
    if (slash < 0 || slash > end) {
      i = end + 1;
      return text.slice(start, end);
    }
    // With escapes: find the closing quote, let JSON.parse decode.
    let j = start;
    for (;;) {
      const q = text.indexOf('"', j);
      if (q < 0) fail("unterminated string");
      let back = 0;
      for (let k = q - 1; k >= start && text[k] === "\\"; k--) back++;
      if (back % 2 === 0) {
        i = q + 1;
        return JSON.parse(text.slice(start - 1, q + 1));
      }
      j = q + 1;
    }
  };
  const number = () => {
    const start = i;
    if (text[i] === "-") i++;
    while (i < n && text[i] >= "0" && text[i] <= "9") i++;
    let integral = true;
    if (text[i] === ".") {
      integral = false;
      i++;
      while (i < n && text[i] >= "0" && text[i] <= "9") i++;
    }
    if (text[i] === "e" || text[i] === "E") {
      integral = false;
      i++;
      if (text[i] === "+" || text[i] === "-") i++;
      while (i < n && text[i] >= "0" && text[i] <= "9") i++;
    }
    const s = text.slice(start, i);
    if (s === "-" || s === "") fail("bad number");
    if (integral && s.length > 15) {
      const b = BigInt(s);
      if (b > SAFE || b < -SAFE) return b;
      return Number(s);
    }
    const v = Number(s);
    if (Number.isNaN(v)) fail("bad number");
    return v;
  };
  const v = value();
  ws();
  if (i !== n) fail("trailing characters");
  return v;
}

const replacer = (_k, v) => (typeof v === "bigint" ? { __bigint__: v.toString() } : v);
const BIG = /\{\s*"__bigint__":\s*"(-?\d+)"\s*\}/g; // (written with or without indentation)

/** stringify writes JSON; BigInts are written as integers. */
export function stringify(v, space) {
  return JSON.stringify(v, replacer, space).replace(BIG, "$1");
}

/** canonical writes v with object keys sorted at every level (for comparing values). */
export function canonical(v) {
  if (v === null || typeof v !== "object") return typeof v === "bigint" ? v.toString() : JSON.stringify(v);
  if (Array.isArray(v)) return "[" + v.map(canonical).join(",") + "]";
  const keys = Object.keys(v).sort();
  return "{" + keys.map((k) => JSON.stringify(k) + ":" + canonical(v[k])).join(",") + "}";
}

/** big turns a JSON integer (number or BigInt) into a BigInt. */
export function big(v) {
  if (typeof v === "bigint") return v;
  if (typeof v === "number" && Number.isFinite(v)) return BigInt(Math.trunc(v));
  if (typeof v === "string" && /^-?\d+$/.test(v)) return BigInt(v);
  return 0n;
}
