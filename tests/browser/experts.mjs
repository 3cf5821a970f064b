// Drives headless Chromium (Debian's, through playwright-core) through the run page's Experts
// panel, each figure checked against the API's:
//   node experts.mjs URL MOE_RUN DENSE_RUN SCREENSHOT_DIR
// MOE_RUN is live and logs a step of expert loads (4 MoE layers of 8 experts) every few
// hundred milliseconds while this runs; DENSE_RUN has none. Checks: the dense run shows no
// Experts panel at all; the MoE run's layer selector lists the API's layers; the latest table
// holds each layer's latest imbalance, aux loss and dropped share; the heatmap reads back the
// API's counts under the pointer and grows as live steps arrive; the imbalance and aux loss
// charts draw every layer's stored values; the page fits a 1400-px window. Any failed
// expectation exits non-zero with one line saying which.
import { launchBrowser } from "./launch.mjs";

const [url, moe, dense, shots] = process.argv.slice(2);
const timeout = 30000;
const expect = (ok, what) => { if (!ok) throw new Error(what); };
const api = async (path) => (await fetch(url + path)).json();
const close = (a, b) => Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b));

const browser = await launchBrowser();
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  const text = async (selector) => (await page.locator(selector).textContent()).trim();

  // --- A dense run: no panel, not even an empty one ---
  await page.goto(`${url}#/run/${dense}`);
  await page.waitForFunction(() => document.getElementById("chart-loss")?.chart?.data[0].length > 0, null, { timeout });
  await page.waitForTimeout(500);
  expect(await page.locator("#experts").isHidden(), "a run without expert loads shows an Experts panel");

  // --- The MoE run ---
  await page.goto(`${url}#/run/${moe}`);
  await page.locator("#experts-latest tbody tr").first().waitFor({ timeout });
  const body = await api(`api/runs/${moe}/experts`);
  const options = await page.locator("#experts-layer option").evaluateAll((os) => os.map((o) => Number(o.value)));
  expect(options.join() === body.layers.join(), `layer selector ${options} instead of ${body.layers}`);

  // The latest table: each layer's figures at the step the page last heard of.
  const rows = await page.locator("#experts-latest tbody tr").evaluateAll((trs) =>
    trs.map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent)));
  expect(rows.length === body.layers.length, `latest table has ${rows.length} rows`);
  const shownStep = Number(rows[0][2]);
  const atStep = await api(`api/runs/${moe}/experts?from=${shownStep}&to=${shownStep}`);
  for (const [i, s] of atStep.series.entries()) {
    const [layer, experts, step, imbalance, aux, , dropped] = rows[i];
    expect(Number(layer) === s.layer && Number(experts) === 8 && Number(step) === s.step[0], `latest row ${i}: ${rows[i]}`);
    expect(imbalance === s.imbalance[0].toFixed(2), `layer ${s.layer} imbalance ${imbalance}, API ${s.imbalance[0]}`);
    expect(aux === s.aux_loss[0].toFixed(4), `layer ${s.layer} aux loss ${aux}, API ${s.aux_loss[0]}`);
    const routed = s.tokens[0].reduce((a, b) => a + b, 0), lost = (s.dropped[0] || []).reduce((a, b) => a + b, 0);
    expect(dropped === `${((100 * lost) / routed).toFixed(1)}%`, `layer ${s.layer} dropped ${dropped}`);
  }

  // The heatmap: layer 1 chosen, its first column's first expert under the pointer.
  await page.selectOption("#experts-layer", "1");
  expect(await page.locator("#experts-heatmap").getAttribute("data-layer") === "1", "the heatmap did not switch to layer 1");
  const layer1 = body.series.find((s) => s.layer === 1);
  await page.locator("#experts-heatmap").scrollIntoViewIfNeeded();
  const box = await page.locator("#experts-heatmap").boundingBox();
  const experts = Number(await page.locator("#experts-heatmap").getAttribute("data-experts"));
  const rowHeight = (box.height - 4 - 22) / experts;
  await page.mouse.move(box.x + 46, box.y + 4 + rowHeight * 0.5);
  const tokens = layer1.tokens[0][0], total = layer1.tokens[0].reduce((a, b) => a + b, 0), dropped = layer1.dropped[0][0] || 0;
  const expected = `step ${layer1.step[0]} · expert 0: ${tokens} tokens, ${((100 * tokens) / total).toFixed(1)}% of the layer's` +
    (dropped ? `, ${dropped} dropped` : "");
  expect(await text("#experts-readout") === expected, `heatmap readout "${await text("#experts-readout")}" instead of "${expected}"`);
  // The bottom right cell: the layer's newest step, its last expert.
  await page.mouse.move(box.x + box.width - 10, box.y + 4 + rowHeight * (experts - 0.5));
  expect((await text("#experts-readout")).includes(`· expert ${experts - 1}:`), `bottom right cell: ${await text("#experts-readout")}`);

  // The charts: a line per layer, the stored values.
  for (const [id, key] of [["chart-experts-imbalance", "imbalance"], ["chart-experts-aux", "aux_loss"]]) {
    const state = await page.evaluate((id) => {
      const u = document.getElementById(id).chart;
      return { labels: u.series.map((s) => s.label), data: u.data };
    }, id);
    expect(state.labels.slice(1).join() === body.layers.map((l) => `layer ${l}`).join(), `${id}: lines ${state.labels}`);
    for (const [i, s] of body.series.entries()) {
      const at = state.data[0].indexOf(s.step[0]);
      expect(at >= 0 && close(state.data[i + 1][at], s[key][0]), `${id}: layer ${s.layer} at step ${s.step[0]} is ${state.data[i + 1][at]}, API ${s[key][0]}`);
    }
  }

  // Live: new steps' columns arrive without a reload.
  const columns = Number(await page.locator("#experts-heatmap").getAttribute("data-steps"));
  await page.waitForFunction((n) => Number(document.getElementById("experts-heatmap").dataset.steps) > n + 1, columns, { timeout });

  const width = await page.evaluate(() => ({ page: document.documentElement.scrollWidth, window: innerWidth }));
  expect(width.page <= width.window, `the run page overflows a 1400-px window: ${JSON.stringify(width)}`);
  await page.locator("#experts").screenshot({ path: `${shots}/experts.png` });
  expect(errors.length === 0, `page errors: ${errors.join("; ")}`);
  console.log("experts panel: hidden for a dense run; layers, latest figures, heatmap cells, charts and live columns match the API");
} finally {
  await browser.close();
}
