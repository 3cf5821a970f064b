// Saves the Experts panel of one stored run as a PNG, for the docs:
//   node shoot_experts.mjs URL RUN FILE
// Waits for the heatmap to hold the run's steps; exits non-zero with one line if it never does.
import { launchBrowser } from "./launch.mjs";

const [url, run, file] = process.argv.slice(2);
const browser = await launchBrowser();
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await page.goto(`${url}#/run/${run}`);
  await page.waitForFunction(() => Number(document.getElementById("experts-heatmap")?.dataset.steps) > 0, null,
    { timeout: 30000 });
  await page.locator("#experts").screenshot({ path: file });
} finally {
  await browser.close();
}
