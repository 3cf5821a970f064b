// The dashboard's runs page in headless Chromium over a large store (the store-scale
// benchmark runs it against store a, bench/README.md):
//   node bench/runs_page_memory.mjs URL NEWEST OLDEST
// It opens the runs page, times the newest run's row appearing, scrolls the whole table down
// in window-sized steps, times the oldest run's row appearing at the end, and prints the
// page's JavaScript heap, its DOM nodes, and the resident memory of all of Chromium's
// processes together (an upper bound: shared pages count once per process).
import { execFileSync } from "node:child_process";
import { launchBrowser } from "../tests/browser/launch.mjs";

const [url, newest, oldest] = process.argv.slice(2);
const timeout = 60000;

function chromiumResidentBytes() {
  const out = execFileSync("ps", ["-eo", "rss=,args="], { encoding: "utf8" });
  return out.split("\n").filter((line) => /chrom/.test(line) && !/runs_page_memory/.test(line))
    .reduce((sum, line) => sum + 1024 * Number(line.trim().split(/\s+/)[0] || 0), 0);
}

const browser = await launchBrowser();
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Performance.enable");
  const metrics = async () => Object.fromEntries((await cdp.send("Performance.getMetrics")).metrics.map((m) => [m.name, m.value]));

  let start = Date.now();
  await page.goto(url);
  await page.locator(`#runs tr[data-run="${newest}"]`).waitFor({ timeout });
  const firstRowsMs = Date.now() - start;

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
  const mib = (bytes) => (bytes / 1048576).toFixed(1);
  console.log(`  runs page: first rows in ${firstRowsMs} ms; scrolled to the end in ${steps} window-sized steps, the last row in ${scrolledMs} ms`);
  console.log(`  runs page after scrolling every run: JS heap ${mib(m.JSHeapUsedSize)} MiB used of ${mib(m.JSHeapTotalSize)} MiB, ${m.Nodes} DOM nodes, `
    + `Chromium's processes ${mib(chromiumResidentBytes())} MiB resident; under 500 MB ${chromiumResidentBytes() < 500e6 ? "pass" : "FAIL"}`);
} finally {
  await browser.close();
}
