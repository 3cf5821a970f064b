// Drives headless Chromium (Debian's, through playwright-core) over a fork's lineage and the
// Release button:
//   node lineage.mjs URL PARENT FORK LIVE SCREENSHOT_DIR
// FORK was forked from PARENT's checkpoint at step 8 with another learning rate; LIVE trains
// until released. The fork's page names its parent and the step, and its loss chart draws
// the parent's curve (dashed) up to step 8 before its own from step 9; the parent's page lists
// the fork; Release on the live run's page ends it as released. Any failed expectation exits
// non-zero with one line saying which.
import { launchBrowser } from "./launch.mjs";

const [url, parent, fork, live, shots] = process.argv.slice(2);
const timeout = 30000;
const expect = (ok, what) => { if (!ok) throw new Error(what); };

const browser = await launchBrowser();
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("dialog", (dialog) => dialog.accept());
  const chartOf = (id) => page.evaluate((id) => {
    const u = document.getElementById(id).chart;
    return { labels: u.series.map((s) => s.label), data: u.data };
  }, id);

  // --- The fork: its parent named, and the parent's curve before its own ---
  await page.goto(`${url}#/run/${fork}`);
  const lineage = page.locator("#run-lineage");
  await lineage.waitFor({ timeout });
  const says = (await lineage.textContent()).trim();
  expect(says === `forked from ${parent} at step 8 → this run`, `fork's lineage: "${says}"`);
  await page.waitForFunction(() => document.getElementById("chart-loss")?.chart?.series.some((s) => s.label?.endsWith("(parent)")), null, { timeout });
  const loss = await chartOf("chart-loss");
  const at = loss.labels.indexOf(`${parent} (parent)`), own = loss.labels.indexOf("rank 0");
  expect(at > 0 && own > 0, `fork's loss chart lines: ${loss.labels}`);
  const steps = loss.data[0];
  const drawn = (k) => steps.filter((_, i) => loss.data[k][i] != null);
  const parentSteps = drawn(at), ownSteps = drawn(own);
  expect(parentSteps[0] === 1 && parentSteps[parentSteps.length - 1] === 8, `parent's curve covers steps ${parentSteps}`);
  expect(ownSteps[0] === 9, `the fork's own curve starts at step ${ownSteps[0]}`);
  const api = await (await fetch(`${url}api/runs/${parent}/metrics?keys=loss&to=8`)).json();
  const parentLoss = api.series.loss.find((r) => r.rank === 0).value;
  const shown = steps.map((s, i) => [s, loss.data[at][i]]).filter(([, y]) => y != null).map(([, y]) => y);
  expect(shown.length === parentLoss.length && shown.every((y, i) => Math.abs(y - parentLoss[i]) < 1e-12),
    `the parent's drawn curve ${shown} is not its stored loss ${parentLoss}`);
  await page.screenshot({ path: `${shots}/lineage.png`, fullPage: false });

  // --- The parent lists its fork ---
  await page.goto(`${url}#/run/${parent}`);
  await page.locator("#run-lineage").waitFor({ timeout });
  const forks = (await page.locator("#run-lineage").textContent()).trim();
  expect(forks.startsWith(`forks (1): ${fork} at step 8`), `parent's lineage: "${forks}"`);
  await page.click(`#run-lineage a:text("${fork}")`);
  await page.waitForFunction((name) => document.querySelector("h1")?.textContent === name, fork, { timeout });

  // --- Release from the dashboard ---
  await page.goto(`${url}#/run/${live}`);
  await page.waitForFunction(() => document.getElementById("run-status")?.textContent === "running", null, { timeout });
  await page.click("#steer-release");
  await page.waitForFunction(() => document.getElementById("run-status")?.textContent === "released", null, { timeout });
  expect(await page.locator("#steer-release").isDisabled(), "Release stays enabled on a released run");

  expect(errors.length === 0, `page errors: ${errors.join("; ")}`);
} finally {
  await browser.close();
}
