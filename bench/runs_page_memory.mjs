// The dashboard's runs page in headless Chromium over a large store (the store-scale
// benchmark runs it against store a, bench/README.md):
//   node bench/runs_page_memory.mjs URL NEWEST OLDEST
// It opens the runs page, times the newest run's row appearing (in a fresh browser, then over
// five reloads), scrolls the whole table down
// in window-sized steps, times the oldest run's row appearing at the end, and prints the
// page's JavaScript heap, its DOM nodes, and the resident memory of its renderer and of all
// of Chromium's processes.
import { launchBrowser } from "../tests/browser/launch.mjs";
import { residentBytes } from "./renderer_memory.mjs";

const [url, newest, oldest] = process.argv.slice(2);
const timeout = 60000;

const browser = await launchBrowser();
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Performance.enable");
  const metrics = async () => Object.fromEntries((await cdp.send("Performance.getMetrics")).metrics.map((m) => [m.name, m.value]));

  // The first load starts the browser's caches and compilers; the reloads after it are what a
  // user opening the page again sees.
  let start = Date.now();
  await page.goto(url);
  await page.locator(`#runs tr[data-run="${newest}"]`).waitFor({ timeout });
  const firstRowsMs = Date.now() - start;
  const reloads = [];
  for (let i = 0; i < 5; i++) {
    start = Date.now();
    await page.reload();
    await page.locator(`#runs tr[data-run="${newest}"]`).waitFor({ timeout });
    reloads.push(Date.now() - start);
  }
  reloads.sort((a, b) => a - b);

  // Down the whole table a window at a time, as a user holding Page Down would.
  let steps = 0;
  start = Date.now();
  for (;;) {
    const done = await page.evaluate(() => {
      window.scrollBy(0, innerHeight);
      return innerHeight + scrollY >= document.documentElement.scrollHeight - 2;
    });
    steps++;
    await page.waitForTimeout(20);
    if (done) break;
  }
  await page.locator(`#runs tr[data-run="${oldest}"]`).waitFor({ timeout });
  const scrolledMs = Date.now() - start;
  const m = await metrics();
  const resident = await residentBytes(browser);
  const mib = (bytes) => (bytes / 1048576).toFixed(1);
  console.log(`  runs page: first rows in ${firstRowsMs} ms in a fresh browser, ${reloads[2]} ms (median of 5 reloads, the slowest ${reloads[4]} ms); scrolled to the end in ${steps} window-sized steps, the last row in ${scrolledMs} ms`);
  console.log(`  runs page after scrolling every run: JS heap ${mib(m.JSHeapUsedSize)} MiB used of ${mib(m.JSHeapTotalSize)} MiB, ${m.Nodes} DOM nodes; `
    + `the page's renderer ${mib(resident.page.rss)} MiB resident (under 500 MB ${resident.page.rss < 500e6 ? "pass" : "FAIL"}; `
    + `${mib(resident.page.anon)} MiB of it its own), all of Chromium's processes ${mib(resident.all)} MiB`);
} finally {
  await browser.close();
}
