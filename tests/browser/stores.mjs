// Drives headless Chromium (Debian's, through playwright-core) over a dashboard that shows two
// stores (docs/dashboard.md#several-stores):
//   node stores.mjs URL
// The served store holds a finished run `base`; the read-only store `host-b` holds another
// finished `base` and the live run `remote`. The runs table has a Store column, marks the
// read-only store's runs and offers them no tag button; the live run's page follows it over
// the WebSocket with every steering button disabled and says why; the compare page compares
// the two `base` runs by address. Any failed expectation exits non-zero with one line saying
// which.
import { launchBrowser } from "./launch.mjs";

const [url] = process.argv.slice(2);
const timeout = 30000;
const expect = (ok, what) => { if (!ok) throw new Error(what); };

const browser = await launchBrowser();
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));

  // --- The runs table: one list, a Store column, read-only runs without a tag button ---
  await page.goto(url);
  for (const run of ["base", "host-b:base", "host-b:remote"])
    await page.locator(`#runs tr[data-run="${run}"]`).waitFor({ timeout });
  const headers = await page.locator("#runs thead th").evaluateAll((ths) => ths.map((th) => th.textContent.replace(/ [▾▴]$/, "")));
  expect(headers.includes("Store"), `runs table: no Store column in ${headers}`);
  const storeOf = (run) => page.locator(`#runs tr[data-run="${run}"] td[data-col="store"]`).textContent();
  expect((await storeOf("base")).trim() === "host-a", `base's store: ${await storeOf("base")}`);
  expect((await storeOf("host-b:base")).trim() === "host-b (read-only)", `host-b:base's store: ${await storeOf("host-b:base")}`);
  const tagButtons = (run) => page.locator(`#runs tr[data-run="${run}"] td[data-col="tags"] button`).count();
  expect(await tagButtons("base") === 1, "the served store's run has no tag button");
  expect(await tagButtons("host-b:base") === 0, "a read-only store's run offers a tag button");
  expect(await page.locator(`#runs tr[data-run="host-b:base"].read-only`).count() === 1, "host-b:base is not marked read-only");

  // --- The live run of the read-only store: followed live, its buttons disabled ---
  await page.click(`#runs tr[data-run="host-b:remote"] a[href="#/run/host-b%3Aremote"]`);
  await page.waitForFunction(() => document.getElementById("run-status")?.textContent === "running", null, { timeout });
  const firstSteps = await page.waitForFunction(() => {
    const u = document.getElementById("chart-loss")?.chart;
    return u && u.data[0].length > 0 && u.data[0][u.data[0].length - 1];
  }, null, { timeout });
  const first = await firstSteps.jsonValue();
  // Steps arrive over the WebSocket without a reload.
  await page.waitForFunction((first) => {
    const xs = document.getElementById("chart-loss").chart.data[0];
    return xs[xs.length - 1] > first;
  }, first, { timeout });
  const buttons = await page.locator(".steer button").evaluateAll((bs) => bs.map((b) => [b.id, b.disabled]));
  expect(buttons.length >= 6 && buttons.every(([, disabled]) => disabled), `steering buttons of a read-only run: ${JSON.stringify(buttons)}`);
  const store = (await page.locator("#run-store").textContent()).trim();
  expect(store === "store host-b (read-only)", `run page's store: "${store}"`);
  const said = (await page.locator("#steer-message").textContent()).trim();
  expect(said.startsWith("read-only"), `run page's steering message: "${said}"`);

  // --- Compare the two runs named base, across the stores ---
  await page.goto(`${url}#/compare?runs=base,host-b:base`);
  await page.locator("#summary th[data-run]").first().waitFor({ timeout });
  const columns = await page.locator("#summary th[data-run]").evaluateAll((ths) => ths.map((th) => th.dataset.run));
  expect(JSON.stringify(columns) === JSON.stringify(["base", "host-b:base"]), `compare columns: ${columns}`);
  await page.waitForFunction(() => document.getElementById("compare-loss")?.chart?.series.length === 3, null, { timeout });

  expect(errors.length === 0, `page errors: ${errors.join("; ")}`);
} finally {
  await browser.close();
}
