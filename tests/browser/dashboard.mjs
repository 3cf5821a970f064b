// Drives headless Chromium (Debian's, through playwright-core) through the dashboard:
//   node dashboard.mjs URL LIVE_RUN FINISHED_A FINISHED_B SCREENSHOT_DIR
// The runs table lists a finished run; the live run's loss chart grows as it trains; Pause
// pauses it and Resume resumes it; the compare page overlays two runs. Each page is saved as
// a screenshot, the compare page in both colour schemes. Any failed expectation exits
// non-zero with one line saying which.
import { chromium } from "playwright-core";

const [url, live, finishedA, finishedB, shots] = process.argv.slice(2);
const timeout = 30000;

const browser = await chromium.launch({
  executablePath: process.env.KILN_CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("dialog", (dialog) => dialog.accept());

  await page.goto(url);
  await page.locator(`#runs tr[data-run="${finishedA}"]`).waitFor({ timeout });
  const status = await page.locator(`#runs tr[data-run="${finishedA}"] .status`).textContent();
  if (status !== "completed") throw new Error(`runs table: ${finishedA} shows as ${status}`);
  await page.screenshot({ path: `${shots}/runs.png`, fullPage: true });

  await page.goto(`${url}#/run/${live}`);
  const loss = page.locator("#chart-loss");
  await loss.waitFor({ timeout });
  const points = async () => Number(await loss.getAttribute("data-points"));
  const before = await points();
  await page.waitForFunction((b) => Number(document.querySelector("#chart-loss").dataset.points) > b + 2, before, { timeout });

  await page.click("#steer-pause");
  await page.waitForFunction(() => document.querySelector("#run-status").textContent === "paused", null, { timeout });
  await page.screenshot({ path: `${shots}/live.png`, fullPage: true });
  await page.click("#steer-resume");
  await page.waitForFunction(() => document.querySelector("#run-status").textContent === "running", null, { timeout });
  const resumedAt = await points();
  await page.waitForFunction((b) => Number(document.querySelector("#chart-loss").dataset.points) > b, resumedAt, { timeout });

  await page.goto(`${url}#/compare?runs=${finishedA},${finishedB}`);
  await page.locator("#compare-chart canvas").waitFor({ timeout });
  await page.locator("#summary tbody tr").first().waitFor({ timeout });
  const legend = await page.locator("#compare-chart .u-legend").textContent();
  for (const run of [finishedA, finishedB])
    if (!legend.includes(run)) throw new Error(`compare chart: no line for ${run} in its legend (${legend})`);
  await page.screenshot({ path: `${shots}/compare.png`, fullPage: true });

  // The other colour scheme: the switch redraws the page in it.
  await page.click("#theme");
  await page.locator("#compare-chart canvas").waitFor({ timeout });
  await page.screenshot({ path: `${shots}/compare-other-scheme.png`, fullPage: true });

  if (errors.length) throw new Error(`page errors: ${errors.join("; ")}`);
  console.log("dashboard: runs table, live chart, pause/resume and compare all work");
} catch (e) {
  console.error(`dashboard test failed: ${e.message.split("\n")[0]}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
