// Drives headless Chromium (Debian's, through playwright-core) through the dashboard's views
// where a store's contents crowd them (tests/views_browser_test.cpp writes the store):
//   node views.mjs URL CHECK
// CHECK is one of:
//   runs-table: at 1400 px the runs table (8 sweep points' runs with three tags, a sweep
//     link and a CPU's long name each, and an expert-parallel run) shows every column inside
//     the window; at 1000 and 700 px it still fits, the columns of lowest priority hidden
//     first (Device, Layout, MFU, ...) and named above it, Name, Status and Duration kept.
//   slowest-rank: on the expert-parallel run, the tokens/s and loss charts label "(slowest)"
//     the rank the API and the Ranks panel name (rank 2, the longest working time), not the
//     rank with the lowest tokens/s (rank 1).
//   parallel-coordinates: on the sweep's page no two labels of the parallel coordinates or
//     the scatter overlap, each of train.warmup's values (5, 6, 9, 90) is labelled; the two
//     training points are drawn dashed with a hollow dot on the loss axis, the loss axis
//     spans the finished points' losses only, and the hover calls a training point's loss
//     interim.
// Any failed expectation exits non-zero with one line saying which.
import { launchBrowser } from "./launch.mjs";

const [url, check] = process.argv.slice(2);
const timeout = 30000;
const expect = (ok, what) => { if (!ok) throw new Error(what); };
const api = async (path) => (await fetch(url + path)).json();

// Overlapping pairs among boxes {text, x, y, width, height}, as "a/b" strings.
function overlaps(boxes) {
  const found = [];
  for (let i = 0; i < boxes.length; i++)
    for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i], b = boxes[j];
      if (a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height) found.push(`${a.text}/${b.text}`);
    }
  return found;
}

async function runsTable(page) {
  const headers = () => page.locator("#runs thead th:not([hidden])").evaluateAll((ths) => ths.map((th) => th.textContent.replace(/ [▾▴]$/, "")).filter(Boolean));
  const fits = () => page.evaluate(() => ({ page: document.documentElement.scrollWidth, window: innerWidth,
    table: document.querySelector("#runs").getBoundingClientRect().right,
    wrap: document.querySelector("#runs").parentElement.getBoundingClientRect().right }));
  const all = ["Status", "Name", "Tags", "Layout", "Device", "Steps", "Loss", "Tokens/s", "MFU", "Started", "Duration"];
  // The order the columns hide in, as runs_columns.js gives their priorities.
  const hiding = ["Device", "Layout", "MFU", "Started", "Tags", "Tokens/s", "Duration", "Loss", "Steps", "Status"];

  await page.goto(url);
  await page.locator('#runs tr[data-run="lr-warmup-7"] .sweep-link').waitFor({ timeout });
  await page.locator('#runs tr[data-run="moe-ep4"]').waitFor({ timeout });
  let width = await fits();
  expect(width.page <= width.window && width.table <= width.wrap, `the runs table overflows a 1400-px window: ${JSON.stringify(width)}`);
  expect((await headers()).join() === all.join(), `at 1400 px the columns are ${await headers()}`);
  expect(await page.locator("#runs-fit").isHidden(), "at 1400 px a column is said to be hidden");
  // Every run's duration and device inside the window, whole or cut with its tooltip.
  const rights = await page.locator('#runs td[data-col="duration_s"]').evaluateAll((tds) => tds.map((td) => td.getBoundingClientRect().right));
  expect(rights.length === 9 && rights.every((r) => r > 0 && r <= 1400), `durations at ${rights}`);
  const device = await page.locator('#runs tr[data-run="lr-warmup-0"] td[data-col="device"] span').getAttribute("title");
  expect(device === "AMD EPYC 7763 64-Core Processor", `the device's title: ${device}`);
  // The tags are whole, on as many lines as they need.
  const tags = await page.locator('#runs tr[data-run="lr-warmup-0"] .tag').allTextContents();
  expect(tags.join() === "baseline,lr-warmup,2026-q4", `tags ${tags}`);

  for (const narrower of [1000, 700]) {
    await page.setViewportSize({ width: narrower, height: 900 });
    // The resize redraws on the next frame: two frames on, the table has been fitted again
    // (the note may already show from the wider window before).
    await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
    await page.waitForFunction(() => !document.getElementById("runs-fit").hidden, null, { timeout });
    width = await fits();
    expect(width.page <= width.window && width.table <= width.wrap, `the runs table overflows a ${narrower}-px window: ${JSON.stringify(width)}`);
    const shown = await headers();
    const hidden = all.filter((h) => !shown.includes(h));
    expect(hidden.length > 0 && hidden.every((h, i) => hiding.slice(0, hidden.length).includes(h)) && hidden.length + shown.length === all.length,
      `at ${narrower} px hidden ${hidden}, shown ${shown}`);
    for (const kept of ["Name", "Status", "Duration"]) expect(shown.includes(kept), `at ${narrower} px ${kept} is hidden: ${shown}`);
    const note = (await page.locator("#runs-fit").textContent()).trim();
    expect(note.startsWith(`Hidden to fit the window: ${hiding.filter((h) => hidden.includes(h)).join(", ")}.`), `at ${narrower} px the note says "${note}"`);
  }
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.waitForFunction(() => document.getElementById("runs-fit").hidden, null, { timeout });
  expect((await headers()).join() === all.join(), `back at 1400 px the columns are ${await headers()}`);
}

async function slowestRank(page) {
  const ranks = await api("api/runs/moe-ep4/ranks");
  expect(ranks.slowest === 2, `the API's slowest rank is ${ranks.slowest}`);
  const last = ranks.ranks.map((r) => r.tokens_per_s);
  expect(last.indexOf(Math.min(...last)) === 1, `rank 1 should report the lowest tokens/s: ${last}`);
  await page.goto(`${url}#/run/moe-ep4`);
  await page.locator("#ranks-table tr.slowest").waitFor({ timeout });
  expect(await page.locator("#ranks-table tr.slowest").getAttribute("data-rank") === "2", "the Ranks panel highlights another rank");
  const labels = (id) => page.evaluate((id) => document.getElementById(id).chart.series.map((s) => s.label), id);
  for (const chart of ["chart-tokens_per_s", "chart-loss"]) {
    await page.waitForFunction((id) => document.getElementById(id)?.chart?.series.some((s) => /slowest/.test(s.label)), chart, { timeout });
    const slowest = (await labels(chart)).filter((l) => l.endsWith("(slowest)"));
    expect(slowest.join() === "rank 2 (slowest)", `${chart} calls ${slowest} the slowest`);
    const legend = await page.locator(`#${chart} .u-legend`).textContent();
    expect(legend.includes("rank 2 (slowest)") && !legend.includes("rank 1 (slowest)"), `${chart}'s legend: ${legend}`);
  }
}

async function parallelCoordinates(page) {
  const body = await api("api/sweeps/lr-warmup");
  const metric = body.best?.metric ?? "final_loss";
  const finished = body.points.filter((p) => p.status === "completed").map((p) => p[metric]);
  const training = body.points.filter((p) => p.status === "running");
  expect(finished.length === 6 && training.length === 2, `points: ${body.points.map((p) => p.status)}`);
  expect(training.every((p) => p[metric] > Math.max(...finished)), "the training points' losses should be above the finished ones'");

  await page.goto(`${url}#/sweep/lr-warmup`);
  await page.locator("#sweep-parallel polyline").first().waitFor({ timeout });
  const boxes = (selector) => page.locator(`${selector} text`).evaluateAll((texts) => texts.map((t) => {
    const b = t.getBBox();
    return { text: t.textContent, x: b.x, y: b.y, width: b.width, height: b.height };
  }));
  const parallel = await boxes("#sweep-parallel");
  expect(overlaps(parallel).length === 0, `parallel coordinates: labels overlap: ${overlaps(parallel)}`);
  const warmup = await page.locator('#sweep-parallel .axis[data-key="train.warmup"] text:not(.axis-name)').allTextContents();
  expect(warmup.join() === "5,6,9,90", `train.warmup's labels: ${warmup}`);

  // The training points apart: dashed lines, hollow dots on the loss axis, not the best.
  const apart = await page.locator("#sweep-parallel polyline.training").evaluateAll((ls) => ls.map((l) => ({
    point: Number(l.dataset.point), dash: getComputedStyle(l).strokeDasharray })));
  expect(apart.map((l) => l.point).sort().join() === training.map((p) => p.point).sort().join(), `dashed lines: ${JSON.stringify(apart)}`);
  expect(apart.every((l) => l.dash !== "none"), `training lines not dashed: ${JSON.stringify(apart)}`);
  expect(await page.locator("#sweep-parallel circle.training").count() === 2, "no hollow dot per training point");
  // The loss axis spans the finished points' losses: its lowest and highest labels are theirs.
  const lossAxis = await page.locator("#sweep-parallel .axis").last().locator("text:not(.axis-name)").allTextContents();
  const ends = [Number(lossAxis[0]), Number(lossAxis[lossAxis.length - 1])];
  const near = (a, b) => Math.abs(a - b) <= 1e-3 * Math.abs(b);
  expect(near(ends[0], Math.min(...finished)) && near(ends[1], Math.max(...finished)),
    `the loss axis runs ${ends}, the finished points' losses ${Math.min(...finished)}..${Math.max(...finished)}`);
  // A training point's real value is in its tooltip and the hover line.
  await page.locator(`#sweep-parallel polyline[data-point="${training[0].point}"]`).dispatchEvent("mouseover");
  const hover = (await page.locator("#sweep-hover").textContent()).trim();
  expect(/· interim final (valid )?loss [\d.]+ at step \d+ \(running\) · lr-warmup-\d$/.test(hover), `hover over a training point: "${hover}"`);

  const scatter = await boxes("#sweep-scatter");
  expect(overlaps(scatter).length === 0, `scatter: labels overlap: ${overlaps(scatter)}`);
  await page.selectOption("#sweep-scatter-key", "train.warmup");
  const byWarmup = await boxes("#sweep-scatter");
  expect(overlaps(byWarmup).length === 0, `scatter by train.warmup: labels overlap: ${overlaps(byWarmup)}`);
  expect(await page.locator("#sweep-scatter circle.training").count() === 2, "the scatter's training points are not hollow");
}

const browser = await launchBrowser();
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  const checks = { "runs-table": runsTable, "slowest-rank": slowestRank, "parallel-coordinates": parallelCoordinates };
  expect(checks[check], `no check named ${check}`);
  await checks[check](page);
  expect(errors.length === 0, `page errors: ${errors.join("; ")}`);
  console.log(`views: ${check} passed`);
} catch (e) {
  console.error(`views test (${check}) failed: ${e.message.split("\n")[0]}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
