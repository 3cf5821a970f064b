// Drives headless Chromium (Debian's, through playwright-core) through what the dashboard's
// pages tell a new user, each figure checked against the API's:
//   node pages.mjs URL LIVE_RUN SAMPLED_RUN OTHER_RUN SCREENSHOT_DIR
// SAMPLED_RUN and OTHER_RUN are finished CPU runs (tags baseline and sweep, other learning
// rates; SAMPLED_RUN's samples after two prompts at steps 3 and 6); LIVE_RUN trains until stopped, sampling every 50 steps.
// Runs table: a favicon, the table fits a 1400-px window, a column hides and a config key
// becomes one (both remembered), rows filter by a config value and group by tag or config key.
// Run page: planned steps, elapsed time and ETA; slower than planned marked only for a slowdown
// that lasts; no MFU or GPU panel on the CPU, and why;
// host memory; round ticks; the samples under their steps, live ones arriving; Pause and
// Resume each disabled when they cannot apply. Compare page: the grid of metrics with the run
// page's controls and summary columns that line up, its charts and choices the metric list's. Any failed expectation exits non-zero
// with one line saying which.
import { launchBrowser } from "./launch.mjs";

const [url, live, sampled, other, shots] = process.argv.slice(2);
const timeout = 30000;
const expect = (ok, what) => { if (!ok) throw new Error(what); };
const same = (a, b) => a.length === b.length && a.every((x, i) => Math.abs(x - b[i]) <= 1e-9 * Math.max(1, Math.abs(b[i])));
const api = async (path) => (await fetch(url + path)).json();

const browser = await launchBrowser();
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("dialog", (dialog) => dialog.accept());

  // What a chart draws, and how its axes tick.
  const chartState = (id) => page.evaluate((id) => {
    const u = document.getElementById(id).chart;
    return { labels: u.series.map((s) => s.label), data: u.data, distr: u.scales.y.distr,
      ticks: u.axes.map((a) => ({ incr: a._found && a._found[0], splits: a._splits || [] })) };
  }, id);
  const settled = (id) => page.waitForFunction((id) => document.getElementById(id)?.chart?.data[0].length > 0, id, { timeout });
  const text = async (selector) => (await page.locator(selector).textContent()).trim();
  const headers = () => page.locator("#runs thead th").evaluateAll((ths) => ths.map((th) => th.textContent.replace(/ [▾▴]$/, "")));
  const visibleRuns = () => page.locator("#runs tbody tr[data-run]").evaluateAll((rows) => rows.map((r) => r.dataset.run));
  // The runs table asks the server after each change: these wait for what it then draws.
  const shownRuns = (expected) => page.waitForFunction((expected) =>
    [...document.querySelectorAll("#runs tbody tr[data-run]")].map((r) => r.dataset.run).join() === expected, expected, { timeout }).catch(() => null);
  const cellSettled = (selector) => page.waitForFunction((selector) => !["", "—", "…"].includes(document.querySelector(selector)?.textContent.trim() ?? ""),
    selector, { timeout }).catch(() => null);
  const groupsShown = (first) => page.locator(`#runs tr.group[data-group="${first}"]`).waitFor({ timeout });

  // --- The runs table ---
  await page.goto(url);
  const icon = await page.locator('link[rel="icon"]').getAttribute("href");
  expect(icon && icon.startsWith("data:image/svg+xml"), `favicon: ${icon}`);
  await page.locator(`#runs tr[data-run="${sampled}"]`).waitFor({ timeout });
  await page.locator(`#runs tr[data-run="${live}"]`).waitFor({ timeout });
  const width = await page.evaluate(() => ({ page: document.documentElement.scrollWidth, window: innerWidth,
    table: document.querySelector("#runs").getBoundingClientRect().right }));
  expect(width.page <= width.window && width.table <= width.window, `runs table overflows a 1400-px window: ${JSON.stringify(width)}`);
  const defaults = await headers();
  for (const h of ["Status", "Name", "Tags", "Layout", "Device", "Steps", "Loss", "Tokens/s", "MFU", "Started", "Duration"])
    expect(defaults.includes(h), `runs table: no ${h} column in ${defaults}`);

  await page.click("#columns-menu summary");
  await page.uncheck("#column-device");
  expect(!(await headers()).includes("Device"), "hiding Device left its column");
  await page.fill("#add-column", "train.lr");
  await page.click("#add-column-button");
  const lrColumn = (await headers()).indexOf("train.lr");
  expect(lrColumn > 0, `adding train.lr: columns ${await headers()}`);
  const configs = Object.fromEntries((await api("api/runs?config=1")).runs.map((r) => [r.name, r.config]));
  const lrCell = async (run) => {
    await cellSettled(`#runs tr[data-run="${run}"] td:nth-child(${lrColumn + 1})`);
    return text(`#runs tr[data-run="${run}"] td:nth-child(${lrColumn + 1})`);
  };
  expect(await lrCell(other) === "0.01", `train.lr of ${other}: ${await lrCell(other)}`);
  expect(Number(await lrCell(sampled)) === configs[sampled].train.lr, `train.lr of ${sampled}: ${await lrCell(sampled)}`);
  await page.click("#columns-menu summary");
  await page.screenshot({ path: `${shots}/runs.png`, fullPage: true });
  await page.reload();
  await page.locator(`#runs tr[data-run="${sampled}"]`).waitFor({ timeout });
  const remembered = await headers();
  expect(!remembered.includes("Device") && remembered.includes("train.lr"), `column choices not remembered: ${remembered}`);

  await page.selectOption("#filter-key", "train.lr");
  await page.fill("#filter-value", "0.01");
  await shownRuns(other);
  expect((await visibleRuns()).join() === other, `filter train.lr = 0.01: ${await visibleRuns()}`);
  await page.fill("#filter-value", "");
  // The search: words in a name or a tag, and KEY=VALUE words for config values.
  await page.fill("#filter-search", `${other.slice(0, 3).toUpperCase()} train.lr=0.01`);
  await shownRuns(other);
  expect((await visibleRuns()).join() === other, `search for ${other}: ${await visibleRuns()}`);
  expect(await text("#runs-count") === "1 run", `the count after a search: ${await text("#runs-count")}`);
  await page.fill("#filter-search", "");
  await page.locator(`#runs tr[data-run="${sampled}"]`).waitFor({ timeout });

  await page.selectOption("#group-by", "tag");
  await groupsShown("baseline");
  const groupsOf = () => page.locator("#runs tr.group").evaluateAll((rows) => rows.map((r) => r.dataset.group));
  expect((await groupsOf()).join() === "baseline,sweep,(no tags)", `group by tag: ${await groupsOf()}`);
  const after = (group) => page.locator(`#runs tr.group[data-group="${group}"] + tr`).getAttribute("data-run");
  expect(await after("baseline") === sampled && await after("sweep") === other && await after("(no tags)") === live,
    "group by tag: a run under the wrong tag");
  await page.selectOption("#group-by", "train.lr");
  await groupsShown("0.01");
  const lrGroups = await groupsOf();
  expect(lrGroups.length === 2 && lrGroups.includes("0.01") && lrGroups.includes(String(configs[sampled].train.lr)), `group by train.lr: ${lrGroups}`);
  expect(await after("0.01") === other, "group by train.lr: the 0.01 group does not hold its run");
  expect(/2 runs$/.test(await text(`#runs tr.group[data-group="${configs[sampled].train.lr}"]`)), "group by train.lr: the default group should count 2 runs");

  // --- A finished CPU run's page ---
  await page.goto(`${url}#/run/${sampled}`);
  await settled("chart-loss");
  await page.locator("#samples article").first().waitFor({ timeout });
  expect(await text("#run-progress") === "step 6 of 6 planned (100%)", `progress: ${await text("#run-progress")}`);
  expect(/^elapsed \d+s$/.test(await text("#run-elapsed")), `elapsed: ${await text("#run-elapsed")}`);
  expect(await text("#run-eta") === "ETA — (completed)", `ETA of a finished run: ${await text("#run-eta")}`);
  // The plan kiln recorded for the run's layout on this CPU beside what it measured.
  expect(/^planned \d+\.\d ms\/step · measured \d+\.\d ms\/step$/.test(await text("#run-plan-step")), `plan: ${await text("#run-plan-step")}`);
  expect(/^planned memory \d+\.\d [KMG]iB · measured \d+\.\d [KMG]iB$/.test(await text("#run-plan-memory")), `planned memory: ${await text("#run-plan-memory")}`);
  // Its plan is set far faster than it ran, but three logged steps are too few for a slowdown
  // that lasts: not marked. The live run, as slow against its plan, logs steps enough to be.
  const slowerMarked = () => page.locator("#run-measured-step").evaluate((e) => e.classList.contains("slower-than-planned"));
  expect(!(await slowerMarked()), "a run of three logged steps is marked slower than planned");
  expect(await page.locator("#chart-mfu").count() === 0 && await page.locator("#chart-gpu").count() === 0, "a CPU run shows an MFU or GPU panel");
  expect((await text("#hidden-panels")).includes("CPU"), `no word on the hidden panels: ${await text("#hidden-panels")}`);
  for (const id of ["#steer-pause", "#steer-resume", "#steer-stop"])
    expect(await page.locator(id).isDisabled(), `${id} is enabled on a finished run`);

  const [system] = (await api(`api/runs/${sampled}/system`)).filter((row) => row.rank === 0);
  await settled("chart-host-memory");
  const memory = await chartState("chart-host-memory");
  expect(memory.labels.join() === "time since start,machine in use,machine total,this process (resident)", `host memory chart: ${memory.labels}`);
  expect(memory.data[1][0] === system.host_mem_used && memory.data[2][0] === system.host_mem_total && memory.data[3][0] === system.rss_bytes,
    "host memory chart: not the stored readings");

  // Round ticks: every spacing is 1, 2 or 5 times a power of ten, every tick a multiple of it.
  for (const id of ["chart-grad_norm", "chart-lr", "chart-tokens_per_s"]) {
    const { ticks } = await chartState(id);
    for (const [axis, { incr, splits }] of ticks.entries()) {
      const mantissa = incr / 10 ** Math.floor(Math.log10(incr) + 1e-9);
      expect([1, 2, 5].some((m) => Math.abs(mantissa - m) < 1e-6), `${id} axis ${axis}: ticks every ${incr}`);
      expect(splits.length > 0 && splits.every((s) => Math.abs(s / incr - Math.round(s / incr)) < 1e-6), `${id} axis ${axis}: ticks ${splits} not on multiples of ${incr}`);
    }
  }

  const stored = await api(`api/runs/${sampled}/samples`);
  const shown = await page.locator("#samples article").evaluateAll((articles) =>
    articles.map((a) => ({ step: Number(a.dataset.step), slot: Number(a.dataset.slot), text: a.querySelector("p").textContent })));
  const order = shown.map((s) => `${s.step}/${s.slot}`).join();
  expect(order === "6/0,6/1,3/0,3/1", `samples shown as step/prompt ${order}`);
  expect(stored.length === 4, `${stored.length} samples stored instead of 4`);
  for (const s of stored) {
    const on = shown.find((x) => x.step === s.step && x.slot === s.slot);
    expect(on && on.text === s.prompt + s.text, `sample ${s.slot} at step ${s.step}: ${on?.text} instead of ${s.prompt + s.text}`);
  }

  // --- The live run: ETA, buttons that match the status, samples arriving ---
  await page.goto(`${url}#/run/${live}`);
  await settled("chart-loss");
  await page.waitForFunction(() => /^step \d+ of 1000000 planned \(\d+%\)$/.test(document.querySelector("#run-progress").textContent), null, { timeout });
  await page.waitForFunction(() => /^ETA \d+(h|m|s)/.test(document.querySelector("#run-eta").textContent), null, { timeout });
  await page.waitForFunction(() => document.querySelector("#run-measured-step")?.classList.contains("slower-than-planned"), null, { timeout });
  expect(!(await page.locator("#steer-pause").isDisabled()) && await page.locator("#steer-resume").isDisabled(), "running: Pause should be enabled and Resume disabled");
  const newestSample = () => page.locator("#samples article").first().getAttribute("data-step").then(Number);
  await page.locator("#samples article").first().waitFor({ timeout });
  const firstSeen = await newestSample();
  await page.waitForFunction((s) => Number(document.querySelector("#samples article")?.dataset.step) > s, firstSeen, { timeout });
  await page.screenshot({ path: `${shots}/run.png`, fullPage: true });
  await page.click("#steer-pause");
  await page.waitForFunction(() => document.querySelector("#run-status").textContent === "paused", null, { timeout });
  expect(await page.locator("#steer-pause").isDisabled() && !(await page.locator("#steer-resume").isDisabled()), "paused: Pause should be disabled and Resume enabled");
  expect(await text("#run-eta") === "ETA — (paused)", `ETA while paused: ${await text("#run-eta")}`);
  await page.click("#steer-resume");
  await page.waitForFunction(() => document.querySelector("#run-status").textContent === "running", null, { timeout });
  expect(!(await page.locator("#steer-pause").isDisabled()) && await page.locator("#steer-resume").isDisabled(), "resumed: Pause should be enabled again");

  // --- Compare ---
  await page.goto(`${url}#/compare?runs=${sampled},${other}`);
  for (const key of ["loss", "valid", "lr", "grad_norm", "tokens_per_s", "mem_used"]) {
    await settled(`compare-${key}`);
    const labels = (await chartState(`compare-${key}`)).labels;
    expect(labels.join() === `step,${sampled},${other}`, `compare ${key}: lines ${labels}`);
  }
  // The grid and the chosen metric's choices are the metric list's (GET /api/metric-fields).
  const fields = await api("api/metric-fields");
  const inView = (view) => fields.filter((f) => f.views.includes(view)).map((f) => f.name);
  const choices = await page.locator("#compare-metric option").evaluateAll((options) => options.map((o) => o.value));
  expect(choices.join() === inView("compare_choice").join(), `compare's metric choices ${choices}, the list's ${inView("compare_choice")}`);
  const grid = await page.locator("#compare-charts > [id^=compare-]").evaluateAll((charts) => charts.map((c) => c.id.replace("compare-", "")));
  expect(grid.filter((k) => k !== "valid" && k !== "chart").join() === inView("compare_grid").join(), `compare's grid ${grid}, the list's ${inView("compare_grid")}`);
  const raw = await api(`api/runs/${sampled}/metrics?keys=loss,tokens&ranks=0&points=0`);
  const [loss0] = raw.series.loss, [tokens0] = raw.series.tokens;
  let loss = await chartState("compare-loss");
  const at = (chart, xs, line) => xs.map((x) => chart.data[line][chart.data[0].indexOf(x)]);
  expect(same(at(loss, loss0.step, 1), loss0.value), "compare loss: not the stored rank 0 loss");
  expect(loss.distr === 3, "compare loss should start on a log scale");
  const valid = await api(`api/runs/${sampled}/valid`);
  const validChart = await chartState("compare-valid");
  expect(same(at(validChart, valid.map((v) => v.step), 1), valid.map((v) => v.loss)), "compare valid: not the stored validation losses");

  await page.selectOption("#chart-x", "tokens");
  await settled("compare-loss");
  loss = await chartState("compare-loss");
  expect(same(at(loss, tokens0.value, 1), loss0.value), "compare x by tokens: the loss is not at its tokens");
  await page.selectOption("#chart-x", "elapsed");
  await settled("compare-loss");
  const started = (await api(`api/runs/${sampled}`)).started_at;
  loss = await chartState("compare-loss");
  expect(same(at(loss, loss0.time.map((t) => t - started), 1), loss0.value), "compare x by time: the loss is not at its time since start");
  await page.selectOption("#chart-x", "step");
  await page.check("#log-lr");
  await settled("compare-lr");
  expect((await chartState("compare-lr")).distr === 3, "compare log toggle: the lr scale is not logarithmic");
  await page.fill("#chart-smoothing", "0.5");
  loss = await chartState("compare-loss");
  let average = 0;
  const smoothed = loss0.value.map((v, i) => { average = 0.5 * average + 0.5 * v; return average / (1 - 0.5 ** (i + 1)); });
  expect(same(at(loss, loss0.step, 1), smoothed), "compare smoothing 0.5: not the moving average");
  await page.fill("#chart-smoothing", "0");

  await page.locator("#summary tbody tr").first().waitFor({ timeout });
  for (const run of [sampled, other]) {
    const a = await page.locator(`#config-diff th[data-run="${run}"]`).boundingBox();
    const b = await page.locator(`#summary th[data-run="${run}"]`).boundingBox();
    expect(Math.abs(a.x - b.x) < 1 && Math.abs(a.width - b.width) < 1, `${run}'s columns do not line up: ${JSON.stringify([a, b])}`);
  }
  const summary = (await api(`api/compare?runs=${sampled},${other}`)).summary;
  const finals = await page.locator('#summary tr[data-figure="final loss"] td.num').allTextContents();
  expect(finals.join() === summary.map((s) => s.final_loss.toFixed(4)).join(), `summary final losses ${finals}`);
  await page.screenshot({ path: `${shots}/compare.png`, fullPage: true });

  if (errors.length) throw new Error(`page errors: ${errors.join("; ")}`);
  console.log("dashboard pages: runs table, run page facts, panels, samples, buttons and the compare grid all check out");
} catch (e) {
  console.error(`dashboard pages test failed: ${e.message.split("\n")[0]}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
