// The dashboard's chart pages in headless Chromium over a large store (the store-scale
// benchmark runs it against stores a to d, bench/README.md):
//   node bench/pages_timing.mjs URL PAGE...
// PAGE is one of:
//   ranks:   #/run/1 of a run of many ranks: first paint is the loss chart's box on the
//            page, the full chart its line drawn and the Ranks panel shown with its table and
//            heat strip drawn.
//   experts: #/run/1 of an MoE run: the same, with the experts heatmap drawn.
//   compare: #/compare?runs=1,...,10: first paint is the loss chart's box, the full chart
//            its ten runs' lines drawn.
// For each page it loads it once in a fresh browser, then reloads it ten times, and prints
// the p50 and p95 of the reloads' times to first paint and to the full chart, then the
// resident memory of the page's renderer.
import { launchBrowser } from "../tests/browser/launch.mjs";
import { residentBytes } from "./renderer_memory.mjs";

const [url, ...pages] = process.argv.slice(2);
const timeout = 60000;
const reloads = 10;

// The run page, full once its loss line and the panel `canvas` (shown, with its steps drawn)
// are: a panel that is still hidden has not been drawn yet.
function runPage(canvas) {
  return {
    hash: "#/run/1",
    first: () => document.getElementById("chart-loss") !== null,
    full: `document.getElementById("chart-loss")?.chart?.data[0].length > 0 &&
      document.getElementById("${canvas}")?.closest("[hidden]") === null &&
      Number(document.getElementById("${canvas}").dataset.steps) > 0`,
  };
}

const specs = {
  ranks: runPage("ranks-heat"),
  experts: runPage("experts-heatmap"),
  compare: {
    hash: "#/compare?runs=1,2,3,4,5,6,7,8,9,10",
    first: () => document.getElementById("compare-loss") !== null,
    full: () => document.getElementById("compare-loss")?.chart?.data.length === 11 &&
      document.getElementById("compare-loss").chart.data[10].some((y) => y != null),
  },
};

const browser = await launchBrowser();
try {
  for (const name of pages) {
    const spec = specs[name];
    if (!spec) throw new Error(`no page '${name}': ranks, experts or compare`);
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    // One load, timed from navigation to each condition.
    const load = async (go) => {
      const start = Date.now();
      await go();
      await page.waitForFunction(spec.first, null, { timeout, polling: 5 });
      const first = Date.now() - start;
      await page.waitForFunction(spec.full, null, { timeout, polling: 5 });
      return { first, full: Date.now() - start };
    };
    const fresh = await load(() => page.goto(url + spec.hash));
    const times = [];
    for (let i = 0; i < reloads; i++) times.push(await load(() => page.reload()));
    const at = (key, q) => times.map((t) => t[key]).sort((a, b) => a - b)[Math.min(reloads - 1, Math.floor(q * reloads))];
    const resident = await residentBytes(browser);
    const mib = (bytes) => (bytes / 1048576).toFixed(1);
    console.log(`  ${(name + " page (" + spec.hash + ")").padEnd(34)} first paint ${at("first", 0.5)} / ${at("first", 0.95)} ms, `
      + `full chart ${at("full", 0.5)} / ${at("full", 0.95)} ms (p50 / p95 of ${reloads} reloads; ${fresh.first} and ${fresh.full} ms in a fresh browser), `
      + `full chart p95 < 500 ms ${at("full", 0.95) < 500 ? "pass" : "FAIL"}; the page's renderer ${mib(resident.page.rss)} MiB resident `
      + `(under 500 MB ${resident.page.rss < 500e6 ? "pass" : "FAIL"})`);
    await page.close();
  }
} finally {
  await browser.close();
}
