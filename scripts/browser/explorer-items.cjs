// More of the explorer's end-to-end checks (issue 25's list, item by item),
// called by explorer.cjs with its helpers: relative times with the date on
// hover, the header's tip as one moment, the script version explained, the
// contract's source, the type filter, the participants' payouts, a Cardano
// explorer link clicked (the only request that leaves the port), and the
// documentation's pictures of the list.

"use strict";

// t: {api, check, openPage, enc, LINKS, QUERY_URL, waitForRecord, docShot, sleep}
module.exports = function items(t) {
  const { api, check, openPage, enc, LINKS, waitForRecord, docShot, sleep } = t;

  // timesHover: every relative time under sel says how far away it is and
  // carries the date (with its year) on hover.
  async function timesHover(page, sel, what) {
    const times = await page.$$eval(`${sel} time[data-agoms]`, (l) => l.map((x) => [x.getAttribute("datetime"), x.textContent, x.getAttribute("title")]));
    const bad = times.filter(([iso, rel, title]) => !/^\d{4}-\d\d-\d\dT/.test(iso || "") || !/^(in .+|.+ ago|now)$/.test(rel || "") || !/\b\d{4}\b/.test(title || ""));
    check(times.length > 0 && bad.length === 0, `${what}: ${times.length} time(s) say how long ago, the date on hover ("${times[0] && times[0][1]}", "${times[0] && times[0][2]}")`, bad.slice(0, 3));
  }

  // tipOneMoment: the header's tip is a block and the history seq of the
  // same state: the record at that seq is in that block or an earlier
  // one, and the record after it (unless a rollback) in that block or a
  // later one.
  async function tipOneMoment(page, what) {
    await page.waitForFunction(() => document.getElementById("tip").dataset.seq !== undefined, null, { timeout: 15000 });
    const { seq, block } = await page.$eval("#tip", (el) => ({ seq: Number(el.dataset.seq), block: Number(el.dataset.block) }));
    const at = await waitForRecord(`all=true&from=${seq - 1}`, () => true, 10000);
    const next = await waitForRecord(`all=true&from=${seq}`, () => true, 3000);
    const ok = at && at.seq === seq && at.block.blockNo <= block && (!next || next.kind === "rolled_back" || next.block.blockNo >= block);
    const title = await page.$eval("#tip .tip-text", (el) => el.title);
    check(ok && /History seq [\d,]+: the number of the follower's newest record/.test(title),
      `${what}: the header's tip is one moment (block ${block} and seq ${seq}: the record at seq ${seq} is in block ${at && at.block.blockNo}${next ? `, the next in block ${next.block ? next.block.blockNo : "(a rollback)"}` : ""}); the seq explained on hover`, { seq, block, at, next });
  }

  // everyPage: the list's and the timeline's relative times, the tip as
  // one moment, the script version explained and the contract's source
  // (the network's badge on every page: checkPhone).
  async function everyPage(context, errors, base) {
    const page = await openPage(context, `${base}/`, errors);
    await page.waitForSelector("#contracts tbody tr[data-id]", { timeout: 15000 });
    await timesHover(page, "#contracts tbody", "the list's Created and Last activity");
    await tipOneMoment(page, "the list");
    const c = (await api("/contracts?order=desc&limit=40")).results.slice(10).find((x) => x.steps > 0);
    await page.goto(`${base}/ui/contract?id=${enc(c.contractId)}`);
    await page.waitForSelector("#timeline li[data-seq]", { timeout: 15000 });
    await timesHover(page, "#timeline", "the timeline's steps");
    await tipOneMoment(page, "a contract page");
    const facts = await page.textContent("#facts");
    check(/Script version\s*v\d .*Every version runs the same Marlowe semantics/s.test(facts), "the script version is explained (which validator, the same semantics)");
    // Its source: the header's link answers the contract's sourceId.
    const href = await page.$eval("#facts a.source-link", (a) => a.href);
    const src = await fetch(href.replace(base, t.QUERY_URL)).then((r) => (r.ok ? r.json() : null));
    const full = await api(`/contracts/${enc(c.contractId)}`);
    check(src && full.sourceId && src.sourceId === full.sourceId, `the header links the contract's source (GET /sources/${full.sourceId && full.sourceId.slice(0, 10)}…)`, { href, src: src && src.sourceId, want: full.sourceId });
    await page.close();
  }

  // typeFilter: the Type filter shows only contracts of that type (a type
  // from a tag, as a row of the first page shows it).
  async function typeFilter(list) {
    await list.waitForFunction(() => [...document.querySelectorAll('#contracts tbody tr[data-id] [data-col="type"]')].some((c) => c.textContent.trim() !== "…"), null, { timeout: 20000 });
    const types = await list.$$eval('#contracts tbody tr[data-id] [data-col="type"]', (l) => l.map((c) => c.textContent.trim()).filter((x) => x && x !== "…" && !x.endsWith("*")));
    const options = await list.$$eval('select[name="type"] option', (l) => l.map((o) => o.value).filter(Boolean));
    const type = types.find((x) => options.includes(x));
    check(type, `a row of the first page has a type from its tag that the filter offers (${types.slice(0, 4).join(", ")})`, { types, options });
    await list.selectOption('select[name="type"]', type);
    await list.waitForFunction((ty) => new URLSearchParams(location.search).get("type") === ty && new URLSearchParams(document.getElementById("contracts").dataset.query || "").get("type") === ty &&
      document.querySelectorAll("#contracts tbody tr[data-id]").length > 0 && /among the [\d,]+ newest read/.test(document.getElementById("summary").textContent) &&
      [...document.querySelectorAll('#contracts tbody tr[data-id] [data-col="type"]')].every((c) => c.textContent.trim() !== "…"), type, { timeout: 30000 });
    // (Read in one go: the live list reads again as contracts come.)
    const [shown, summary] = await list.evaluate(() => [[...document.querySelectorAll('#contracts tbody tr[data-id]:not(.gone) [data-col="type"]')].map((c) => c.textContent.trim().replace(/\*$/, "")),
      document.getElementById("summary").textContent]);
    check(shown.length > 0 && shown.every((x) => x === type) && /among the [\d,]+ newest read|Looking for/.test(summary), `the Type filter "${type}" shows only ${type} contracts (${shown.length}): "${summary.trim()}"`, shown);
    await list.selectOption('select[name="type"]', "");
    await list.waitForFunction(() => !new URLSearchParams(document.getElementById("contracts").dataset.query || "").has("type") && document.querySelectorAll("#contracts tbody tr[data-id]").length > 0, null, { timeout: 10000 });
  }

  // partiesPaid: each role's "Paid out" says what the API's payouts of the
  // contract for that role are (to withdraw, withdrawn, or nothing yet).
  async function partiesPaid(page, contractId) {
    // (The contract's payouts change under the page, a withdrawal a
    // second on the devnet: the page follows its records; looked at again
    // until it shows what the API has, a few times.)
    for (let attempt = 0; ; attempt++) {
      const rows = await page.$$eval("#parties tr[data-party]", (l) => l.map((tr) => [tr.dataset.party, tr.querySelector('[data-label="Paid out"]').textContent]));
      const pays = (await api(`/payouts?contractId=${enc(contractId)}&limit=1000`)).results;
      const wrong = rows.filter(([key, text]) => {
        if (!key.startsWith("role:")) return false;
        const mine = pays.filter((p) => p.role === key.slice(5));
        const want = [mine.some((p) => p.status === "available") ? "to withdraw" : null, mine.some((p) => p.status === "withdrawn") ? "withdrawn" : null].filter(Boolean);
        return want.length ? !want.every((w) => text.includes(w)) : text !== "nothing yet";
      });
      if (wrong.length && attempt < 5) {
        await sleep(1000);
        continue;
      }
      check(wrong.length === 0, `each role's payouts in the participants, as GET /payouts has them (${rows.map(([k, x]) => `${k.replace(/^role:/, "")}: ${x}`).slice(0, 3).join("; ")})`, { wrong, pays });
      break;
    }
  }

  // clickExplorerLink clicks the contract page's link of its creation's
  // transaction to the Cardano explorer: it opens in a new tab, with no
  // referrer and no opener, at the configured URL. It returns the URL
  // requested (the only request allowed off the port).
  async function clickExplorerLink(context, errors, base, contractId) {
    const page = await openPage(context, `${base}/ui/contract?id=${enc(contractId)}`, errors);
    await page.waitForSelector('#facts a.ext[data-ext="tx"]', { timeout: 15000 });
    const want = LINKS.tx.replace("{id}", encodeURIComponent(contractId.split("#")[0]));
    const [req, popup] = await Promise.all([
      context.waitForEvent("request", { predicate: (r) => r.url() === want, timeout: 15000 }),
      context.waitForEvent("page", { timeout: 15000 }),
      page.click('#facts a.ext[data-ext="tx"]'),
    ]);
    const referer = (await req.allHeaders())["referer"];
    const rel = await page.$eval('#facts a.ext[data-ext="tx"]', (a) => [a.getAttribute("rel"), a.getAttribute("target")]);
    check(req.url() === want && !referer && /noopener/.test(rel[0]) && rel[1] === "_blank" && page.url().startsWith(base),
      `a click on an explorer link opens ${new URL(want).host} in a new tab (no referrer sent, no opener); the page stays`, { url: req.url(), referer, rel });
    await popup.close();
    await page.close();
    return req.url();
  }

  // listPictures: the documentation's pictures of the list, light and dark.
  async function listPictures(list) {
    await docShot(list, "explorer-list.png", { height: 1000 });
    await docShot(list, "explorer-list-dark.png", { height: 1000, scheme: "dark" });
  }

  return { everyPage, typeFilter, partiesPaid, clickExplorerLink, listPictures };
};
