// Drives headless Chromium (Debian's, through playwright-core) through the dashboard:
//   node dashboard.mjs URL LIVE_RUN FINISHED_A FINISHED_B SCREENSHOT_DIR
// The runs table lists a finished run; on FINISHED_A's page (two ranks, a checkpoint) the
// chart controls do what they say: bands across ranks, the x axis by step, tokens or wall
// time, log scales, smoothing that leaves the raw values alone, and the checkpoint marked.
// The live run's loss chart grows as it trains, keeping its controls and its zoom; Pause
// pauses it, Resume resumes it, Set learning rate and Checkpoint now are applied by the run
// (every button's request passing the server's Host, Origin and content-type checks); the
// compare page overlays two runs. Each page is saved as
// a screenshot, the compare page in both colour schemes. Any failed expectation exits
// non-zero with one line saying which.
import { launchBrowser } from "./launch.mjs";

const [url, live, finishedA, finishedB, shots] = process.argv.slice(2);
const timeout = 30000;

const browser = await launchBrowser();
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  // Confirmations are accepted; the one prompt, Set learning rate's, is answered.
  const newLearningRate = "0.0006";
  page.on("dialog", (dialog) => dialog.accept(dialog.type() === "prompt" ? newLearningRate : undefined));

  await page.goto(url);
  await page.locator(`#runs tr[data-run="${finishedA}"]`).waitFor({ timeout });
  const status = await page.locator(`#runs tr[data-run="${finishedA}"] .status`).textContent();
  if (status !== "completed") throw new Error(`runs table: ${finishedA} shows as ${status}`);
  await page.screenshot({ path: `${shots}/runs.png`, fullPage: true });

  // What a chart draws: its series' labels, its data, its scales.
  const chartState = (id) => page.evaluate((id) => {
    const u = document.getElementById(id).chart;
    return { labels: u.series.map((s) => s.label), data: u.data, distr: u.scales.y.distr, time: u.scales.x.time,
      min: u.scales.x.min, max: u.scales.x.max, bands: (u.bands || []).map((b) => b.series) };
  }, id);
  const expect = (ok, what) => { if (!ok) throw new Error(what); };
  const same = (a, b) => a.length === b.length && a.every((x, i) => Math.abs(x - b[i]) <= 1e-9 * Math.max(1, Math.abs(b[i])));
  // Rebuilt charts replace their boxes: wait for the new one to hold data.
  const settled = (id) => page.waitForFunction((id) => document.getElementById(id)?.chart?.data[0].length > 0, id, { timeout });

  const raw = await (await fetch(`${url}api/runs/${finishedA}/metrics?keys=loss,tokens,mem_used&points=0`)).json();
  const [loss0] = raw.series.loss;
  const tokens0 = raw.series.tokens[0];
  const [memory0, memory1] = raw.series.mem_used;  // the ranks' losses are one, their memory is not
  expect(memory1, `${finishedA} should have two ranks`);
  await page.goto(`${url}#/run/${finishedA}`);
  await settled("chart-loss");
  let loss = await chartState("chart-loss");
  expect(/^step,rank 0( \(slowest\))?,rank 1( \(slowest\))?,valid$/.test(loss.labels.join()), `per-rank loss chart: series ${loss.labels}`);
  expect(same(loss.data[0], loss0.step) && same(loss.data[1], loss0.value), "per-rank loss chart: rank 0's line is not the stored one");
  expect(loss.distr === 3, "the loss chart should start on a log scale");
  // The rank labelled "(slowest)" is the one the ranks API names (it comes after the charts).
  const { slowest } = await (await fetch(`${url}api/runs/${finishedA}/ranks`)).json();
  if (slowest != null)
    await page.waitForFunction((label) => document.getElementById("chart-tokens_per_s")?.chart?.series.some((s) => s.label === label),
      `rank ${slowest} (slowest)`, { timeout });
  const rates = (await chartState("chart-tokens_per_s")).labels;
  expect(rates.filter((l) => l.endsWith("(slowest)")).join() === (slowest == null ? "" : `rank ${slowest} (slowest)`),
    `tokens/s chart: ${rates}, the API's slowest rank ${slowest}`);

  await page.selectOption("#chart-lines", "bands");
  await settled("chart-loss");
  loss = await chartState("chart-loss");
  expect(loss.labels.join() === "step,max,mean,min,valid", `bands: series ${loss.labels}`);
  expect(loss.bands.length === 1 && loss.bands[0].join() === "1,3", `bands: ${JSON.stringify(loss.bands)}`);
  const memory = await chartState("chart-mem_used");
  expect(same(memory.data[2], memory0.value.map((v, i) => (v + memory1.value[i]) / 2)), "bands: the mean line is not the ranks' mean");
  expect(same(memory.data[1], memory0.value.map((v, i) => Math.max(v, memory1.value[i]))), "bands: the max line is not the ranks' max");
  expect(same(memory.data[3], memory0.value.map((v, i) => Math.min(v, memory1.value[i]))), "bands: the min line is not the ranks' min");
  expect(memory.data[1].some((v, i) => v > memory.data[3][i]), "bands: the ranks' memory should differ somewhere");

  await page.selectOption("#chart-x", "tokens");
  await settled("chart-loss");
  loss = await chartState("chart-loss");
  expect(same(loss.data[0], tokens0.value), `x by tokens: ${loss.data[0].slice(0, 3)} instead of ${tokens0.value.slice(0, 3)}`);
  const checkpointAt = async () => page.locator('#chart-loss .event-mark[data-kind="checkpoint"]').evaluateAll((marks) => marks.map((m) => Number(m.dataset.x)));
  const stepSix = tokens0.value[tokens0.step.indexOf(6)];
  expect((await checkpointAt()).includes(stepSix), `x by tokens: no checkpoint mark at ${stepSix} (${await checkpointAt()})`);
  await page.selectOption("#chart-x", "time");
  await settled("chart-loss");
  loss = await chartState("chart-loss");
  expect(loss.time && loss0.time.every((t) => loss.data[0].includes(t)), "x by wall time: the rows' times are not the x values");
  await page.screenshot({ path: `${shots}/run-bands.png`, fullPage: true });
  await page.selectOption("#chart-x", "step");
  await settled("chart-loss");
  expect((await checkpointAt()).includes(6), `no checkpoint mark at step 6 (${await checkpointAt()})`);
  const title = await page.locator('#chart-loss .event-mark[data-kind="checkpoint"]').first().getAttribute("title");
  expect(title.startsWith("checkpoint at step 6"), `checkpoint mark's tooltip: ${title}`);
  expect((await page.locator("#events").textContent()).includes("checkpoint"), "the events list has no checkpoint");

  await page.check("#log-grad_norm");
  await settled("chart-grad_norm");
  expect((await chartState("chart-grad_norm")).distr === 3, "log toggle: grad norm's y scale is not logarithmic");
  await page.uncheck("#log-grad_norm");
  await settled("chart-grad_norm");
  expect((await chartState("chart-grad_norm")).distr === 1, "log toggle: grad norm's y scale stayed logarithmic");

  await page.selectOption("#chart-lines", "ranks");
  await page.fill("#chart-smoothing", "0.9");
  loss = await chartState("chart-loss");
  let average = 0;
  const smoothed = loss0.value.map((v, i) => { average = 0.9 * average + 0.1 * v; return average / (1 - 0.9 ** (i + 1)); });
  expect(same(loss.data[1], smoothed), "smoothing 0.9: rank 0's line is not the moving average of its values");
  expect(!same(loss.data[1], loss0.value), "smoothing 0.9 left the line as it was");
  await page.fill("#chart-smoothing", "0");
  expect(same((await chartState("chart-loss")).data[1], loss0.value), "smoothing back to 0: the raw values are lost");

  await page.goto(`${url}#/run/${live}`);
  await page.locator("#chart-loss").waitFor({ timeout });
  const points = async () => Number(await page.locator("#chart-loss").getAttribute("data-points"));
  const before = await points();
  await page.waitForFunction((b) => Number(document.querySelector("#chart-loss").dataset.points) > b + 2, before, { timeout });

  // The controls and a zoom hold while rows arrive.
  await page.selectOption("#chart-lines", "bands");
  await page.fill("#chart-smoothing", "0.5");
  await settled("chart-loss");
  const box = await page.locator("#chart-loss .u-over").boundingBox();
  await page.mouse.move(box.x + box.width * 0.2, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2, { steps: 5 });
  await page.mouse.up();
  const zoomed = await chartState("chart-loss");
  expect(zoomed.max < zoomed.data[0][zoomed.data[0].length - 1], "dragging across the loss chart did not zoom in");
  const grown = await points();
  await page.waitForFunction((b) => Number(document.querySelector("#chart-loss").dataset.points) > b + 2, grown, { timeout });
  const after = await chartState("chart-loss");
  expect(after.min === zoomed.min && after.max === zoomed.max, "a live update undid the zoom");
  expect(after.labels.join() === "step,max,mean,min,valid", `a live update lost the bands: ${after.labels}`);
  expect(await page.inputValue("#chart-smoothing") === "0.5", "a live update reset the smoothing");

  await page.click("#steer-pause");
  await page.waitForFunction(() => document.querySelector("#run-status").textContent === "paused", null, { timeout });
  // The pause arrives as an event over the WebSocket and is marked where it was applied.
  await page.locator('#chart-grad_norm .event-mark[data-kind="command"]').first().waitFor({ timeout });
  await page.screenshot({ path: `${shots}/live.png`, fullPage: true });
  await page.click("#steer-resume");
  await page.waitForFunction(() => document.querySelector("#run-status").textContent === "running", null, { timeout });
  const resumedAt = await points();
  await page.waitForFunction((b) => Number(document.querySelector("#chart-loss").dataset.points) > b, resumedAt, { timeout });

  const queued = (action) => page.waitForFunction((action) =>
    new RegExp(`^queued ${action} as command \\d+`).test(document.querySelector("#steer-message").textContent), action, { timeout });
  await page.click("#steer-set");
  await queued("set");
  await page.click("#steer-checkpoint");
  await queued("checkpoint");
  // Marked where it was written (on a chart not zoomed away from it).
  await page.locator('#chart-grad_norm .event-mark[data-kind="checkpoint"]').first().waitFor({ timeout });
  const commands = async () => (await (await fetch(`${url}api/runs/${live}/commands`)).json());
  const applied = async (action) => (await commands()).find((c) => c.action === action)?.status === "applied";
  for (const start = Date.now(); !((await applied("set")) && (await applied("checkpoint"))); ) {
    expect(Date.now() - start < timeout, `set and checkpoint not applied: ${JSON.stringify(await commands())}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const set = (await commands()).find((c) => c.action === "set");
  expect(set.argument === `train.lr=${newLearningRate}`, `the set command's argument: ${set.argument}`);

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
  console.log("dashboard: runs table, chart controls, live chart, pause/resume/set/checkpoint and compare all work");
} catch (e) {
  console.error(`dashboard test failed: ${e.message.split("\n")[0]}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
