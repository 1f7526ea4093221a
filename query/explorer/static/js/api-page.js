// The API page: the service's OpenAPI documents (config.json's apiDocs:
// the native API's /openapi.json, and the Runtime view's where it is
// served), drawn readable: operations by group with their parameters and
// answers, then the schemas, with links between them.

import { get, pageURL } from "./api.js";
import { constraints, matches, operations, schemas, typeOf } from "./openapi.js";
import { $, boot, chrome, fill, h, site } from "./ui.js";

const q = new URLSearchParams(location.search);

function typeEl(s, prefix) {
  return h("code", { class: "type" }, typeOf(s).map((x) => (typeof x === "string" ? x : h("a", { href: `#${prefix}schema-${x.ref}` }, x.ref))));
}

// serverBase is the path the document's first server puts before its
// paths on this port ("/runtime" for the Runtime view's), "" for none.
function serverBase(doc) {
  const url = (doc.servers && doc.servers[0] && doc.servers[0].url) || "";
  return url.startsWith("/") ? url.replace(/\/+$/, "") : "";
}

function opEl(op, prefix, base) {
  const anchor = `${prefix}op-${op.id}`;
  const path = base + op.path;
  return h("details", { class: "op panel", id: anchor, dataset: { method: op.method, path } },
    h("summary", {}, h("span", { class: "method m-" + op.method.toLowerCase() }, op.method), " ", h("code", { class: "path" }, path), " ", h("span", { class: "muted" }, op.summary)),
    op.description ? h("p", {}, op.description) : null,
    op.parameters.length ? [h("h4", {}, "Parameters"), h("div", { class: "table-wrap" }, h("table", { class: "cards" },
      h("thead", {}, h("tr", {}, ["Name", "In", "Type", "Limits", "Meaning"].map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, op.parameters.map((p) => h("tr", {},
        h("td", { dataset: { label: "Name" } }, h("code", {}, p.name), p.required ? h("span", { class: "badge open" }, "required") : null),
        h("td", { dataset: { label: "In" } }, p.in),
        h("td", { dataset: { label: "Type" } }, typeEl(p.schema, prefix)),
        h("td", { dataset: { label: "Limits" } }, constraints(p.schema) || "–"),
        h("td", { dataset: { label: "Meaning" } }, p.description || "–"))))))] : h("p", { class: "muted small" }, "No parameters."),
    op.body ? [h("h4", {}, "Request body", op.body.required ? " (required)" : ""), h("ul", {}, op.body.content.map((c) => h("li", {}, h("code", {}, c.type), " ", typeEl(c.schema, prefix))))] : null,
    h("h4", {}, "Answers"),
    h("ul", { class: "responses" }, op.responses.map((r) => h("li", { dataset: { status: r.status } },
      h("span", { class: "status s" + r.status[0] }, r.status), " ", r.description,
      r.content.length ? [" · ", r.content.map((c, i) => [i ? ", " : "", h("code", {}, c.type), c.schema ? [" ", typeEl(c.schema, prefix)] : null])] : null,
      r.headers.length ? h("span", { class: "muted small" }, ` · headers ${r.headers.join(", ")}`) : null))));
}

function schemaEl(s, prefix) {
  return h("details", { class: "schema", id: `${prefix}schema-${s.name}` },
    h("summary", {}, h("code", {}, s.name), " ", h("span", { class: "muted small" }, typeOf(s.schema).map((x) => (typeof x === "string" ? x : x.ref)).join(""))),
    s.description ? h("p", {}, s.description) : null,
    s.properties.length ? h("div", { class: "table-wrap" }, h("table", { class: "cards" },
      h("thead", {}, h("tr", {}, ["Field", "Type", "Meaning"].map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, s.properties.map((p) => h("tr", {},
        h("td", { dataset: { label: "Field" } }, h("code", {}, p.name), p.required ? h("span", { class: "badge open" }, "always") : null),
        h("td", { dataset: { label: "Type" } }, typeEl(p.schema, prefix), constraints(p.schema) ? h("span", { class: "muted small" }, " · " + constraints(p.schema)) : null),
        h("td", { dataset: { label: "Meaning" } }, p.description || "–")))))) : null);
}

function draw(doc, path, prefix) {
  const info = doc.info || {};
  fill($("doc-head"), h("p", {}, h("strong", {}, info.title || path), ` · version ${info.version || "?"} · OpenAPI ${doc.openapi || "?"} · `, h("a", { href: pageURL(path) }, "the raw JSON")),
    info.description ? h("p", { class: "muted" }, info.description) : null);
  const ops = operations(doc);
  const groups = new Map();
  for (const op of ops) groups.set(op.group, [...(groups.get(op.group) || []), op]);
  const base = serverBase(doc);
  const sections = [...groups].map(([g, list]) => h("section", { class: "op-group", dataset: { group: g } }, h("h2", {}, base + "/" + g), list.map((op) => opEl(op, prefix, base))));
  fill($("ops"), h("p", { class: "muted small", id: "op-count" }, `${ops.length} operations`), sections);
  fill($("schemas"), schemas(doc).map((s) => schemaEl(s, prefix)));
  const filter = () => {
    const text = $("api-q").value;
    let shown = 0;
    for (const el of document.querySelectorAll("details.op")) {
      const op = ops.find((o) => `${prefix}op-${o.id}` === el.id);
      el.hidden = !matches(op, text);
      if (!el.hidden) shown++;
    }
    for (const sec of document.querySelectorAll(".op-group")) sec.hidden = ![...sec.querySelectorAll("details.op")].some((d) => !d.hidden);
    $("op-count").textContent = text.trim() ? `${shown} of ${ops.length} operations match` : `${ops.length} operations`;
  };
  $("api-q").oninput = filter;
  $("api-search").onsubmit = (ev) => ev.preventDefault();
  // A link to an operation or a schema opens it.
  const open = () => {
    const target = location.hash && document.getElementById(location.hash.slice(1));
    if (target && target.tagName === "DETAILS") {
      target.open = true;
      target.scrollIntoView({ block: "start" });
    }
  };
  window.onhashchange = open;
  open();
  document.documentElement.dataset.apiDoc = path;
}

async function main() {
  chrome("ui/api");
  $("tip").hidden = true; // (this page follows no stream)
  await boot();
  const docs = site.apiDocs && site.apiDocs.length ? site.apiDocs : [{ path: "openapi.json", title: "Native API" }];
  const which = docs.find((d) => d.path === q.get("doc")) || docs[0];
  fill($("docs"), docs.map((d) => h("a", { href: pageURL("ui/api", { doc: d.path === docs[0].path ? undefined : d.path }), "aria-current": d === which ? "page" : undefined }, d.title)));
  try {
    const doc = await get(which.path);
    draw(doc, which.path, which === docs[0] ? "" : "rt-");
  } catch (e) {
    fill($("ops"), h("p", { class: "error" }, `The document ${which.path} could not be read: ${e.message}`));
  }
}

main();
