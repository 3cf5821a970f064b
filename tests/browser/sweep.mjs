// Drives headless Chromium (Debian's, through playwright-core) through the sweeps list and a
// sweep's page, each figure checked against the API's:
//   node sweep.mjs URL SWEEP SCREENSHOT_DIR
// SWEEP is live, with 6 points over train.lr (1e-4..1e-2: a log axis) and model.d_model; its
// last point's run logs a step every few hundred milliseconds while this runs. Checks: the
// sweeps list shows it live; the best point is named above the table; the points table holds
// every point's parameters, run link, status and figures, the best point marked; sorting by a
// column; the parallel coordinates draw an axis per parameter and the loss, a polyline per
// point, and name the point under the pointer; the scatter draws a dot per point for each parameter chosen; the live point's row
// follows its run; the runs table links each point's run to the sweep. Any failed
// expectation exits non-zero with one line saying which.
import { launchBrowser } from "./launch.mjs";

const [url, sweep, shots] = process.argv.slice(2);
const timeout = 30000;
const expect = (ok, what) => { if (!ok) throw new Error(what); };
const api = async (path) => (await fetch(url + path)).json();

const browser = await launchBrowser();
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  const text = async (selector) => (await page.locator(selector).textContent()).trim();
  const count = (selector) => page.locator(selector).count();

  // --- The sweeps list, from the header's link ---
  await page.goto(url);
  await page.click("header nav a[href='#/sweeps']");
  await page.locator(`#sweeps tr[data-sweep="${sweep}"]`).waitFor({ timeout });
  expect(await text(`#sweeps tr[data-sweep="${sweep}"] td.status`) === "live", "the sweeps list does not show the sweep live");

  // --- The sweep's page ---
  await page.click(`#sweeps tr[data-sweep="${sweep}"] a`);
  await page.locator("#sweep-points tbody tr").first().waitFor({ timeout });
  const body = await api(`api/sweeps/${sweep}`);
  expect(body.points.length === 6 && body.parameters.join() === "train.lr,model.d_model", `API: ${JSON.stringify(body.parameters)}`);
  expect((await text("h1")) === `Sweep ${sweep}`, `title "${await text("h1")}"`);
  expect((await text("#sweep-state")) === "live", `state "${await text("#sweep-state")}"`);
  expect((await text("#sweep-progress")).startsWith("5/6 done, 1 running, 0 failed"), `progress "${await text("#sweep-progress")}"`);
  expect((await text("#sweep-command")) === body.sweep.command_line, "the command line differs from the API's");
  expect((await text("#sweep-best")).startsWith("best: point 3, final valid loss "), `best "${await text("#sweep-best")}"`);

  // The table: a row per point, in point order, with the API's values.
  const heads = await page.locator("#sweep-points th").evaluateAll((ths) => ths.map((th) => th.dataset.key));
  expect(heads.join() === "point,param:train.lr,param:model.d_model,run,status,last_step,final_loss,best_loss,final_valid_loss,best_valid_loss,tokens_per_s",
    `columns ${heads}`);
  const rows = await page.locator("#sweep-points tbody tr").evaluateAll((trs) =>
    trs.map((tr) => ({ point: Number(tr.dataset.point), best: tr.classList.contains("best"), cells: [...tr.querySelectorAll("td")].map((td) => td.textContent) })));
  expect(rows.length === 6, `${rows.length} rows`);
  for (const [i, row] of rows.entries()) {
    const p = body.points[i];
    expect(row.point === p.point, `row ${i} is point ${row.point}`);
    expect(Number(row.cells[1]) === p.params["train.lr"] && Number(row.cells[2]) === p.params["model.d_model"], `point ${p.point} params ${row.cells}`);
    expect(row.cells[3] === p.run_name, `point ${p.point} run ${row.cells[3]}`);
    if (p.status === "completed") {
      expect(row.cells[4] === "completed" && Number(row.cells[5]) === p.last_step, `point ${p.point}: ${row.cells}`);
      for (const [k, key] of [[6, "final_loss"], [7, "best_loss"], [8, "final_valid_loss"], [9, "best_valid_loss"]])
        expect(row.cells[k] === p[key].toFixed(4), `point ${p.point} ${key} ${row.cells[k]}, API ${p[key]}`);
    }
    expect(row.best === (p.point === body.best.point), `point ${p.point} best: ${row.best}`);
  }
  expect(body.best.point === 3 && body.best.metric === "final_valid_loss", `best ${JSON.stringify(body.best)}`);
  expect(await page.locator("#sweep-points tr.best a").getAttribute("href") === `#/run/${body.points[3].run_name}`, "the best row's run link");

  // Sorting: by final validation loss, the best point first; again, last.
  await page.click("#sweep-points th[data-key=final_valid_loss]");
  expect(await page.locator("#sweep-points tbody tr").first().getAttribute("data-point") === "3", "sorted by final valid loss, point 3 is not first");
  await page.click("#sweep-points th[data-key=final_valid_loss]");
  expect(await page.locator("#sweep-points tbody tr").last().getAttribute("data-point") === "3", "sorted descending, point 3 is not last");

  // Parallel coordinates: an axis per parameter and the loss, a polyline per point.
  const axes = await page.locator("#sweep-parallel .axis-name").allTextContents();
  expect(axes.join() === "train.lr (log),model.d_model,final valid loss", `parallel axes ${axes}`);
  expect(await count("#sweep-parallel polyline") === 6, `${await count("#sweep-parallel polyline")} polylines`);
  expect(await page.locator("#sweep-parallel polyline.best").getAttribute("data-point") === "3", "the best polyline");
  await page.locator("#sweep-parallel polyline[data-point='1']").dispatchEvent("mouseover");
  const hover = await text("#sweep-hover");
  expect(hover.startsWith("point 1: train.lr=1e-4, model.d_model=128 · final valid loss "), `hover "${hover}"`);

  // The scatter: a dot per point against each parameter.
  const keys = await page.locator("#sweep-scatter-key option").evaluateAll((os) => os.map((o) => o.value));
  expect(keys.join() === "train.lr,model.d_model", `scatter parameters ${keys}`);
  expect(await count("#sweep-scatter circle") === 6, `${await count("#sweep-scatter circle")} dots`);
  expect((await text("#sweep-scatter .axis-name")) === "train.lr (log)", `scatter x "${await text("#sweep-scatter .axis-name")}"`);
  await page.selectOption("#sweep-scatter-key", "model.d_model");
  expect((await text("#sweep-scatter .axis-name")) === "model.d_model", "the scatter did not switch parameter");
  expect(await count("#sweep-scatter circle") === 6 && await page.locator("#sweep-scatter circle.best").getAttribute("data-point") === "3", "scatter dots by width");
  await page.selectOption("#sweep-scatter-key", "train.lr");

  // The live point's row follows its run.
  const live = body.points.find((p) => p.status === "running");
  const stepCell = `#sweep-points tr[data-point="${live.point}"] td[data-key=last_step]`;
  const before = Number(await text(stepCell));
  await page.waitForFunction(([selector, was]) => Number(document.querySelector(selector)?.textContent) > was, [stepCell, before], { timeout: 15000 });
  await page.waitForTimeout(300);

  await page.click("#sweep-points th[data-key=point]");
  expect(await page.locator("#sweep-points tbody tr").first().getAttribute("data-point") === "0", "sorted by point, point 0 is not first");
  await page.screenshot({ path: `${shots}/sweep.png`, fullPage: true });

  // The runs table links each point's run to its sweep.
  await page.goto(url + "#/");
  await page.locator("#runs tbody tr").first().waitFor({ timeout });
  await page.locator(".sweep-link").first().waitFor({ timeout });
  const links = await page.locator(".sweep-link").allTextContents();
  expect(links.length === 6 && links.includes(`${sweep} #3`), `sweep links ${links}`);
  await page.click(`#runs tr[data-run="${body.points[3].run_name}"] .sweep-link`);
  await page.locator("#sweep-points tbody tr").first().waitFor({ timeout });
  expect((await text("h1")) === `Sweep ${sweep}`, "the run's sweep link did not open the sweep");

  expect(errors.length === 0, `page errors: ${errors.join("; ")}`);
  console.log("sweep: every check passed");
} finally {
  await browser.close();
}
