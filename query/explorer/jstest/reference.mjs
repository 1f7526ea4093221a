// The reference contracts and traces of testdata/marlowe-reference (the
// marlowe-cardano reference data), read with the explorer's own lossless
// JSON parser.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "../static/js/json.js";

export const DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), "../../../testdata/marlowe-reference");

/** contracts: [{name, contract}] of every *.contract file. */
export function contracts() {
  return fs.readdirSync(DIR).filter((f) => f.endsWith(".contract")).sort()
    .map((f) => ({ name: f.replace(/\.contract$/, ""), contract: parse(fs.readFileSync(path.join(DIR, f), "utf8")) }));
}

/** paths: [{name, paths}] of every *.paths file: [{contract, state, transactions: [{input: {tx_inputs, tx_interval}, output}]}]. */
export function paths() {
  return fs.readdirSync(DIR).filter((f) => f.endsWith(".paths")).sort()
    .map((f) => ({ name: f.replace(/\.paths$/, ""), paths: parse(fs.readFileSync(path.join(DIR, f), "utf8")) }));
}
