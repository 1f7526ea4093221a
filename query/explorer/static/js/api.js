// The public query API and GET /events, as the pages use them. The base is
// where this file is served from, two levels up (/ui/js/api.js -> /), so
// the pages work behind a proxy that mounts the port under a path.

import { parse } from "./json.js";

export const BASE = new URL("../../", import.meta.url);

/** url makes an absolute URL of an API path ("contracts?limit=5") and parameters. */
export function url(path, params) {
  const u = new URL(path.replace(/^\//, ""), BASE);
  if (params) {
    for (const [k, v] of Object.entries(params)) {
      if (v === undefined || v === null || v === "") continue;
      for (const x of Array.isArray(v) ? v : [v]) u.searchParams.append(k, String(x));
    }
  }
  return u;
}

/** pageURL is a page of the explorer: "" (contracts), "ui/contract", "ui/status". */
export function pageURL(page, params) {
  return url(page, params).toString();
}

/** ApiError is an answer that is not 2xx: status, code and message of the body. */
export class ApiError extends Error {
  constructor(status, code, message, seq) {
    super(message || code || `HTTP ${status}`);
    this.status = status;
    this.code = code;
    this.seq = seq; // X-Marlowe-Seq: the state the answer reflects
  }
}

/** get fetches JSON (integers beyond 2^53 as BigInt); not-2xx answers throw ApiError. */
export async function get(path, params, { signal } = {}) {
  const res = await fetch(url(path, params), { headers: { Accept: "application/json" }, signal });
  const text = await res.text();
  let body = null;
  try {
    body = text ? parse(text) : null;
  } catch {
    if (res.ok) throw new ApiError(res.status, "bad_json", "the answer is not JSON");
  }
  if (!res.ok) {
    const seq = res.headers.get("X-Marlowe-Seq");
    throw new ApiError(res.status, body && body.code, body && body.message, seq === null ? undefined : Number(seq));
  }
  return body;
}

/** getText fetches a text answer (/metrics). */
export async function getText(path, { signal } = {}) {
  const res = await fetch(url(path), { signal });
  if (!res.ok) throw new ApiError(res.status, "http", `HTTP ${res.status}`);
  return res.text();
}

/** all follows a list's pages (next links) and returns every result, up to max. */
export async function all(path, params, { max = 10000, signal } = {}) {
  let page = await get(path, params, { signal });
  const out = [...page.results];
  while (page.cursor && out.length < max) {
    page = await get(path, { ...params, cursor: page.cursor }, { signal });
    out.push(...page.results);
  }
  return { results: out, seq: page.seq, block: page.block, nodeTip: page.nodeTip };
}

/** contractPath is the path of a contract ("contracts/TX%23IX"). */
export function contractPath(id, rest = "") {
  return "contracts/" + encodeURIComponent(id) + rest;
}
