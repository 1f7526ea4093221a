// A readable OpenAPI 3 document: its operations (grouped by the first
// segment of their path) with their parameters, request bodies and
// answers, and its schemas, as plain data the API page draws. No DOM: the
// unit tests read it as it is. Only what a reader needs is taken: $refs
// are named, not inlined, so a schema reads as a table with links.

const METHODS = ["get", "head", "post", "put", "patch", "delete", "options"];

/** refName: "#/components/schemas/TxOutRef" -> {kind: "schemas", name: "TxOutRef"}, or null. */
export function refName(ref) {
  const m = /^#\/components\/([^/]+)\/(.+)$/.exec(String(ref || ""));
  return m ? { kind: m[1], name: m[2].replace(/~1/g, "/").replace(/~0/g, "~") } : null;
}

/** resolve follows a $ref inside the document (one level at a time). */
export function resolve(doc, v) {
  for (let i = 0; v && typeof v === "object" && "$ref" in v && i < 20; i++) {
    const r = refName(v.$ref);
    v = r && doc.components && doc.components[r.kind] ? doc.components[r.kind][r.name] : undefined;
  }
  return v;
}

/**
 * typeOf writes a schema in a few words, as a list of parts: strings and
 * {ref} (a schema to link to). ["array of ", {ref: "TxOutRef"}], ["string
 * (date-time)"], ["one of ", {ref: "A"}, " | ", {ref: "B"}], ['"a" | "b"'].
 */
export function typeOf(s, depth = 0) {
  if (!s || typeof s !== "object") return ["any"];
  if (depth > 6) return ["…"];
  const out = [];
  const ref = refName(s.$ref);
  if (ref) return [{ ref: ref.name }];
  for (const key of ["oneOf", "anyOf", "allOf"]) {
    if (Array.isArray(s[key])) {
      out.push(key === "allOf" ? "all of " : "one of ");
      s[key].forEach((x, i) => out.push(...(i ? [key === "allOf" ? " & " : " | "] : []), ...typeOf(x, depth + 1)));
      return withNull(out, s);
    }
  }
  if (Array.isArray(s.enum)) {
    out.push(s.enum.map((x) => JSON.stringify(x)).join(" | "));
    return withNull(out, s);
  }
  const t = Array.isArray(s.type) ? s.type.join(" | ") : s.type;
  if (t === "array") {
    out.push("array of ", ...typeOf(s.items, depth + 1));
  } else if (t === "object" || (!t && s.properties)) {
    if (s.additionalProperties && typeof s.additionalProperties === "object" && !s.properties) out.push("map of ", ...typeOf(s.additionalProperties, depth + 1));
    else out.push("object");
  } else {
    out.push(t || "any");
    if (s.format) out.push(` (${s.format})`);
  }
  return withNull(out, s);
}

function withNull(out, s) {
  if (s.nullable) out.push(" or null");
  return out;
}

/** constraints writes a schema's limits: "1 to 1000", "default 100", "pattern ^…$". */
export function constraints(s) {
  if (!s || typeof s !== "object") return "";
  const parts = [];
  if (s.minimum !== undefined || s.maximum !== undefined) parts.push(`${s.minimum ?? "…"} to ${s.maximum ?? "…"}`);
  if (s.minLength !== undefined || s.maxLength !== undefined) parts.push(`length ${s.minLength ?? 0} to ${s.maxLength ?? "…"}`);
  if (s.maxItems !== undefined) parts.push(`at most ${s.maxItems} values`);
  if (s.pattern) parts.push(`pattern ${s.pattern}`);
  if (s.default !== undefined) parts.push(`default ${JSON.stringify(s.default)}`);
  return parts.join(", ");
}

/**
 * operations lists a document's operations: {id, method, path, group,
 * summary, description, parameters: [{name, in, required, description,
 * schema}], body: {required, content: [{type, schema}]}|null, responses:
 * [{status, description, content: [{type, schema}], headers: [names]}]}.
 */
export function operations(doc) {
  const ops = [];
  for (const [path, item] of Object.entries(doc.paths || {})) {
    const shared = (item.parameters || []).map((p) => resolve(doc, p));
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      const params = new Map();
      for (const p of [...shared, ...(op.parameters || []).map((x) => resolve(doc, x))]) if (p) params.set(p.in + ":" + p.name, p);
      const body = resolve(doc, op.requestBody);
      ops.push({
        id: op.operationId || `${method}-${path}`,
        method: method.toUpperCase(),
        path,
        group: path.split("/")[1] || "/",
        summary: op.summary || "",
        description: op.description || "",
        parameters: [...params.values()].map((p) => ({ name: p.name, in: p.in, required: Boolean(p.required), description: p.description || "", schema: p.schema || {} })),
        body: body ? { required: Boolean(body.required), content: Object.entries(body.content || {}).map(([type, c]) => ({ type, schema: c.schema })) } : null,
        responses: Object.entries(op.responses || {}).map(([status, r0]) => {
          const r = resolve(doc, r0) || {};
          return { status, description: r.description || "", content: Object.entries(r.content || {}).map(([type, c]) => ({ type, schema: c.schema })), headers: Object.keys(r.headers || {}) };
        }),
      });
    }
  }
  return ops;
}

/** schemas lists the document's schemas: {name, description, type, properties: [{name, required, schema, description}]}. */
export function schemas(doc) {
  return Object.entries((doc.components && doc.components.schemas) || {}).map(([name, s]) => ({
    name,
    description: s.description || "",
    schema: s,
    properties: Object.entries(s.properties || {}).map(([p, ps]) => ({ name: p, required: (s.required || []).includes(p), schema: ps, description: ps.description || (resolve(doc, ps) || {}).description || "" })),
  }));
}

/** matches says whether an operation matches a search (its method, path, summary or parameters). */
export function matches(op, q) {
  q = String(q || "").trim().toLowerCase();
  if (!q) return true;
  return [op.method, op.path, op.summary, op.description, op.id, ...op.parameters.map((p) => p.name)].some((x) => String(x).toLowerCase().includes(q));
}
