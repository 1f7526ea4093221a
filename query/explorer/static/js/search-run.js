// The search box's run: what the input is (search.js's classify), then
// where it leads. A contract id opens it; a transaction id opens the
// contract it created, stepped or withdrew from (at that step); a roles
// currency, an address, a party role or anything else (a tag) filters the
// list. Input that looks like an id, an address or a policy but does not
// parse says why.

import { ApiError, contractPath, get, pageURL } from "./api.js";
import { classify } from "./search.js";
import { fill, h, site } from "./ui.js";

const failed = (e) => h("span", { class: "error" }, `The search failed: ${e.message}`);

/**
 * runSearch searches for text, saying what it did in out (an element);
 * filter(key, value) filters the page's list by a query API filter.
 */
export async function runSearch(text, out, filter) {
  fill(out);
  const q = classify(text, { network: site.network });
  out.dataset.kind = q.kind;
  const filterBy = (k, v, note) => {
    filter(k, v);
    fill(out, note || `Showing the contracts with ${k} ${v}.`);
  };
  switch (q.kind) {
    case "empty":
      return;
    case "invalid":
      fill(out, h("span", { class: "error" }, q.why, " Nothing was searched."));
      return;
    case "contract":
      try {
        await get(contractPath(q.value));
        location.href = pageURL("ui/contract", { id: q.value });
      } catch (e) {
        if (e instanceof ApiError && e.status === 404) fill(out, h("span", { class: "error" }, `No contract ${q.value} (as of the API’s current state): it is not created yet, or a rollback removed it.`));
        else fill(out, failed(e));
      }
      return;
    case "tx": {
      fill(out, "Looking for the transaction…");
      try {
        const found = await findTx(q.value);
        if (found) location.href = pageURL("ui/contract", { id: found.contractId }) + found.hash;
        else fill(out, h("span", { class: "error" }, "This transaction created no contract, stepped none and withdrew no payout (as of the API’s current state)."));
      } catch (e) {
        fill(out, failed(e));
      }
      return;
    }
    case "policy":
      return filterBy("roleCurrency", q.value, `Showing the contracts whose roles currency is ${q.value}.`);
    case "role":
      return filterBy("partyRole", q.value);
    case "address":
      return filterBy("partyAddress", q.value);
    default:
      return filterBy("tag", q.value, `No contract, transaction, policy or address looks like “${q.value}”: showing the contracts tagged with it.`);
  }
}

// findTx tries, one at a time: the step the transaction made (of
// whichever contract: GET /transactions/{txId}), the contract it created
// (its first outputs), the withdrawal it made.
async function findTx(tx) {
  const tryGet = async (path) => {
    try {
      return await get(path);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) return null;
      throw e;
    }
  };
  const step = await tryGet("transactions/" + tx);
  if (step) return { contractId: step.contractId, hash: "#tx-" + tx };
  for (let ix = 0; ix < 3; ix++) {
    const c = await tryGet(contractPath(`${tx}#${ix}`));
    if (c) return { contractId: c.contractId, hash: "" };
  }
  const w = await tryGet("withdrawals/" + tx);
  if (w && w.payouts && w.payouts.length) return { contractId: w.payouts[0].contractId, hash: "#tx-" + tx };
  return null;
}
