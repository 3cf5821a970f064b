// Drives headless Chromium (Debian's, through playwright-core) through the run page's
// straggler view and alerts, each figure checked against the API's:
//   node ranks.mjs URL STRAGGLER_RUN STEADY_RUN SCREENSHOT_DIR WIDE_RUN MANY_RUN TURNING_RUN TURN_FILE
// STRAGGLER_RUN is live (4 ranks on two hosts, rank 3 slow, two alerts) and logs a step every
// few hundred milliseconds while this runs; STEADY_RUN has one rank and no alerts. Checks: the
// runs table's badge counts the straggler's alerts (its hover names the latest) and the steady
// run has none; the steady run shows no Ranks panel and no Alerts list; the straggler's table
// holds the API's hosts and step times with the slowest rank highlighted; the heat strip has
// a row per rank, reads the API's values under the pointer and grows as live steps arrive;
// the alerts list and the charts' alert marks match the API; WIDE_RUN (12 ranks, live: rank 5
// the slowest in throughput at its first 10 steps, rank 9 at those logged since) draws its
// throughput as the API's spread, the band, the mean and the slowest rank in the legend, and
// a step that arrives over the WebSocket joins the band as the API's spread has it. MANY_RUN
// (300 ranks, rank 200 the slowest) draws only the table's rows in its box's view, the last
// rank's once scrolled to the end, the slowest rank first when sorted by step time, and its
// heat strip two ranks to a row.
// TURNING_RUN logs 4 ranks a step until this script writes TURN_FILE, then 12: its open page
// turns from a line per rank to the spread, and draws what a reload of the page draws. Any
// failed expectation exits non-zero with one line saying which.
import { writeFileSync } from "node:fs";
import { launchBrowser } from "./launch.mjs";

const [url, straggler, steady, shots, wide, many, turning, turnFile] = process.argv.slice(2);
const timeout = 30000;
const expect = (ok, what) => { if (!ok) throw new Error(what); };
const api = async (path) => (await fetch(url + path)).json();

const browser = await launchBrowser();
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  const text = async (selector) => (await page.locator(selector).textContent()).trim();

  // --- The runs table's badge ---
  await page.goto(`${url}#/`);
  const badge = page.locator(`tr:has(a[href="#/run/${straggler}"]) .alert-badge`);
  await badge.waitFor({ timeout });
  expect(await badge.textContent() === "2", `the badge reads ${await badge.textContent()}`);
  expect((await badge.getAttribute("title")).includes("the latest: straggler: rank 3 on gpu-node-b"), `badge hover: ${await badge.getAttribute("title")}`);
  expect(await page.locator(`tr:has(a[href="#/run/${steady}"]) .alert-badge`).count() === 0, "the steady run has a badge");

  // --- A one-rank run without alerts: neither panel ---
  await page.goto(`${url}#/run/${steady}`);
  await page.waitForFunction(() => document.getElementById("chart-loss")?.chart?.data[0].length > 0, null, { timeout });
  await page.waitForTimeout(500);
  expect(await page.locator("#ranks").isHidden(), "a one-rank run shows a Ranks panel");
  expect(await page.locator("#alerts").isHidden(), "a run without alerts shows an Alerts list");

  // --- The straggler ---
  await page.goto(`${url}#/run/${straggler}`);
  await page.locator("#ranks-table tbody tr").first().waitFor({ timeout });
  const ranks = await api(`api/runs/${straggler}/ranks`);
  expect(ranks.slowest === 3, `the API's slowest is ${ranks.slowest}`);
  const rows = await page.locator("#ranks-table tbody tr").evaluateAll((trs) =>
    trs.map((tr) => ({ rank: Number(tr.dataset.rank), slowest: tr.classList.contains("slowest"), cells: [...tr.querySelectorAll("td")].map((td) => td.textContent) })));
  expect(rows.length === 4, `the table has ${rows.length} rows`);
  for (const row of rows) {
    const r = ranks.ranks[row.rank];
    expect(row.cells[1] === r.host && row.cells[2] === r.device, `rank ${row.rank}: ${row.cells[1]} ${row.cells[2]}, API ${r.host} ${r.device}`);
    expect(row.slowest === (row.rank === 3), `rank ${row.rank} highlighted: ${row.slowest}`);
  }
  // The page's step time for rank 3 is the API's at the step the page shows.
  const shown = rows[3].cells;
  const at = (await api(`api/runs/${straggler}/rank-heat?from=${shown[3]}&to=${shown[3]}`));
  expect(shown[4] === at.step_ms[3][0].toFixed(1), `rank 3's step ${shown[4]} ms, API ${at.step_ms[3][0]}`);
  expect(shown[5] === `${at.relative[3][0].toFixed(2)}x`, `rank 3's work/median ${shown[5]}, API ${at.relative[3][0]}`);
  expect((await text("#ranks-summary")).includes("rank 3 on gpu-node-b is the slowest"), `summary: ${await text("#ranks-summary")}`);
  expect(await page.locator("#ranks-table tr.slowest .split-bar span").count() === 5, "the slowest rank's split bar has five parts");

  // The heat strip: a row per rank; the last cell of rank 3's row is slow, rank 0's even.
  const canvas = page.locator("#ranks-heat");
  expect(await canvas.getAttribute("data-rows") === "4", `the strip has ${await canvas.getAttribute("data-rows")} rows`);
  await canvas.scrollIntoViewIfNeeded();
  const box = await canvas.boundingBox();
  const rowH = (box.height - 4 - 22) / 4;
  await page.mouse.move(box.x + box.width - 10, box.y + 4 + rowH * 3.5);
  const readout = await text("#ranks-readout");
  expect(/^rank 3 on gpu-node-b · step \d+: [\d.]+ ms, working 1\.[5-7]\dx the median rank's$/.test(readout), `strip readout "${readout}"`);
  await page.mouse.move(box.x + 70, box.y + 4 + rowH * 0.5);
  expect(/^rank 0 on gpu-node-a · step 1: [\d.]+ ms, working 1\.00x the median rank's$/.test(await text("#ranks-readout")), `first cell: ${await text("#ranks-readout")}`);

  // Alerts: the list and the charts' marks hold the API's.
  const alerts = await api(`api/runs/${straggler}/alerts`);
  const listed = await page.locator("#alerts-table tbody tr").evaluateAll((trs) => trs.map((tr) => tr.dataset.rule));
  expect(listed.join() === alerts.map((a) => a.rule).reverse().join(), `alerts listed ${listed}, API ${alerts.map((a) => a.rule)}`);
  expect((await text("#alerts-table tbody tr:first-child")).includes("3 on gpu-node-b"), "the straggler alert names its rank's host");
  const marks = await page.locator("#chart-loss .event-mark[data-kind=alert]").evaluateAll((fs) => fs.map((f) => [Number(f.dataset.x), f.title]));
  expect(marks.length === 2, `the loss chart has ${marks.length} alert marks`);
  for (const a of alerts)
    expect(marks.some(([x, title]) => x === a.step && title.includes(`${a.rule}: ${a.message}`)), `no mark at step ${a.step} for ${a.rule}`);

  // Live: the strip grows as steps arrive.
  const steps = Number(await canvas.getAttribute("data-steps"));
  await page.waitForFunction((n) => Number(document.getElementById("ranks-heat").dataset.steps) > n, steps, { timeout });

  const width = await page.evaluate(() => ({ page: document.documentElement.scrollWidth, window: innerWidth }));
  expect(width.page <= width.window, `the run page overflows a 1400-px window: ${JSON.stringify(width)}`);
  await page.locator("#ranks").screenshot({ path: `${shots}/straggler-view.png` });

  // --- A wide run (more than 8 ranks): a per-rank chart is the API's spread across ranks ---
  await page.goto(`${url}#/run/${wide}`);
  const lastShown = () => {
    const xs = document.getElementById("chart-tokens_per_s")?.chart?.data[0] || [];
    return xs.length ? xs[xs.length - 1] : null;
  };
  await page.waitForFunction(lastShown, null, { timeout });
  // A step logged after the page drew: it can only have come over the WebSocket.
  await page.waitForFunction((shown) => document.getElementById("chart-tokens_per_s").chart.data[0].at(-1) > shown,
    await page.evaluate(lastShown), { timeout });
  const rates = await page.evaluate(() => {
    const u = document.getElementById("chart-tokens_per_s").chart, last = u.data[0].length - 1;
    return { labels: u.series.map((s) => s.label), data: u.data, bands: (u.bands || []).map((b) => b.series.join()),
      legend: u.series[3].value(u, u.data[3][0], 3, 0), liveLegend: u.series[3].value(u, u.data[3][last], 3, last) };
  });
  const lastStep = rates.data[0].at(-1);
  const spread = (await api(`api/runs/${wide}/metrics?keys=tokens_per_s&points=2000&to=${lastStep}`)).spread.tokens_per_s;
  expect(rates.labels.join() === "step,max,mean,min, slowest rank", `wide run's chart: series ${rates.labels}`);
  expect(rates.bands.join() === "1,3", `wide run's chart: bands ${rates.bands}`);
  const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
  expect(same(rates.data[0], spread.step) && same(rates.data[1], spread.max) && same(rates.data[2], spread.mean) &&
    same(rates.data[3], spread.min), `wide run's chart up to step ${lastStep}: its lines are not the API's spread`);
  expect(rates.legend === `500 (rank ${spread.slowest_rank[0]})` && spread.slowest_rank[0] === 5, `wide run's legend: ${rates.legend}`);
  expect(lastStep > 10 && rates.liveLegend === "400 (rank 9)", `wide run's live step ${lastStep}: legend ${rates.liveLegend}`);

  // --- 300 ranks: the rows in view, scrolled, sorted ---
  await page.goto(`${url}#/run/${many}`);
  const drawn = () => page.locator("#ranks-table tbody tr[data-rank]").evaluateAll((trs) => trs.map((tr) => Number(tr.dataset.rank)));
  await page.locator("#ranks-table tbody tr[data-rank]").first().waitFor({ timeout });
  let ranksDrawn = await drawn();
  expect(ranksDrawn.length > 10 && ranksDrawn.length < 100 && ranksDrawn[0] === 0, `300 ranks: the table drew ranks ${ranksDrawn[0]}..${ranksDrawn.at(-1)} (${ranksDrawn.length} rows)`);
  await page.locator("#ranks-scroll").evaluate((box) => { box.scrollTop = box.scrollHeight; });
  await page.waitForFunction(() => document.querySelector('#ranks-table tr[data-rank="299"]') !== null, null, { timeout });
  ranksDrawn = await drawn();
  expect(ranksDrawn.length < 100 && !ranksDrawn.includes(0), `scrolled to the end, the table drew ranks ${ranksDrawn[0]}..${ranksDrawn.at(-1)}`);
  await page.locator('#ranks-table th[data-sort="step_ms"]').click();
  await page.locator("#ranks-scroll").evaluate((box) => { box.scrollTop = 0; });
  await page.waitForFunction(() => document.querySelector("#ranks-table tbody tr[data-rank]")?.dataset.rank === "200", null, { timeout });
  expect(await page.locator("#ranks-table tbody tr[data-rank]").first().getAttribute("class") === "slowest", "sorted by step time, the first row is not the slowest rank's");
  expect((await text('#ranks-table th[data-sort="step_ms"]')).endsWith("▾"), "the step time heading does not show the order");
  // The strip folds the 300 ranks two to a row (at most 160 rows); a row reads as its pair.
  const strip = page.locator("#ranks-heat");
  expect(await strip.getAttribute("data-rows") === "150", `300 ranks' strip has ${await strip.getAttribute("data-rows")} rows`);
  await strip.scrollIntoViewIfNeeded();
  const stripBox = await strip.boundingBox();
  await page.mouse.move(stripBox.x + stripBox.width - 10, stripBox.y + 4 + 3 * 100.5);
  const pair = await text("#ranks-readout");
  expect(/^ranks 200–201 \(the slowest of them\) · step 3: [\d.]+ ms, working 1\.9\dx the median rank's$/.test(pair), `300 ranks' strip readout "${pair}"`);

  // --- A run that turns wide while its page is open ---
  await page.goto(`${url}#/run/${turning}`);
  const chartOf = () => {
    const u = document.getElementById("chart-tokens_per_s")?.chart;
    return u ? { labels: u.series.map((s) => s.label), data: u.data } : null;
  };
  await page.waitForFunction(() => document.getElementById("chart-tokens_per_s")?.chart?.series.length === 5, null, { timeout });
  const narrow = await page.evaluate(chartOf);
  expect(narrow.labels[1].startsWith("rank 0") && narrow.labels[4].startsWith("rank 3"), `4 ranks' chart: series ${narrow.labels}`);
  writeFileSync(turnFile, "");
  // Two wide steps drawn, the second from the WebSocket.
  await page.waitForFunction(() => {
    const u = document.getElementById("chart-tokens_per_s")?.chart;
    return u?.series[1].label === "max" && u.data[1].filter((y) => y != null).length >= 2;
  }, null, { timeout });
  const live = await page.evaluate(chartOf);
  expect(live.labels.join() === "step,max,mean,min, slowest rank", `turned wide: series ${live.labels}`);
  const seen = live.data[0].at(-1);
  await page.reload();
  await page.waitForFunction((n) => document.getElementById("chart-tokens_per_s")?.chart?.data[0].at(-1) >= n, seen, { timeout });
  const fresh = await page.evaluate(chartOf);
  const upTo = (chart) => {
    const end = chart.data[0].filter((x) => x <= seen).length;  // steps ascend
    return chart.data.map((ys) => ys.slice(0, end));
  };
  expect(fresh.labels.join() === live.labels.join() && JSON.stringify(upTo(fresh)) === JSON.stringify(upTo(live)),
    `turned wide live, the chart up to step ${seen} is not the reloaded page's: ${JSON.stringify(upTo(live))} against ${JSON.stringify(upTo(fresh))}`);
  expect(errors.length === 0, `page errors: ${errors.join("; ")}`);
  console.log("straggler view: badge, hidden panels for a steady run, table, slowest rank, heat strip cells, alerts list and marks, live columns, a wide run's spread, a live step's too, match the API; 300 ranks' table draws the rows in view, scrolls and sorts; a run turning wide while its page is open draws what a reload draws");
} finally {
  await browser.close();
}
