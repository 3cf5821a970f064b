// Drives headless Chromium (Debian's, through playwright-core) over a live run's rewind past
// a loss spike:
//   node rewind.mjs URL RUN READY_FILE SCREENSHOT_DIR
// RUN has logged steps 1..20, its loss spiking at step 18. Once its loss chart shows them, this
// writes READY_FILE; the test then records a rewind to step 15 and logs steps 16.. again, at
// loss 0.05. The page must reload itself: the loss chart draws the abandoned steps 16..20 in
// rank 0's colour, dimmed, with their stored losses (the spike among them), marks the rewind
// at step 15, and draws the steps trained again on rank 0's own line. Any failed expectation
// exits non-zero with one line saying which.
import { writeFileSync } from "node:fs";
import { launchBrowser } from "./launch.mjs";

const [url, run, ready, shots] = process.argv.slice(2);
const timeout = 30000;
const expect = (ok, what) => { if (!ok) throw new Error(what); };

const browser = await launchBrowser();
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  const chart = () => page.evaluate(() => {
    const u = document.getElementById("chart-loss")?.chart;
    if (!u) return null;
    return { labels: u.series.map((s) => s.label), strokes: u.series.map((s, i) => (i ? s.stroke(u, i) : null)),
      data: u.data, marks: [...document.querySelectorAll("#chart-loss .event-mark")].map((m) => ({ kind: m.dataset.kind, x: +m.dataset.x, text: m.title })) };
  });
  const drawn = (c, label) => {
    const k = c.labels.indexOf(label);
    return k < 0 ? null : c.data[0].map((x, i) => [x, c.data[k][i]]).filter(([, y]) => y != null);
  };

  await page.goto(`${url}#/run/${run}`);
  await page.waitForFunction(() => document.getElementById("chart-loss")?.chart?.data[0].length === 20, null, { timeout });
  const before = await chart();
  expect(!before.labels.some((l) => l.startsWith("abandoned")), `before the rewind: lines ${before.labels}`);
  writeFileSync(ready, "");

  // The rewind reloads the page; the steps trained again arrive after it.
  await page.waitForFunction(() => {
    const u = document.getElementById("chart-loss")?.chart;
    const own = u?.series.findIndex((s) => s.label === "rank 0");
    return u && own > 0 && u.series.some((s) => s.label === "abandoned (rewind 1)") &&
      u.data[0].some((x, i) => x === 18 && u.data[own][i] === 0.05);
  }, null, { timeout });
  const after = await chart();
  const abandoned = drawn(after, "abandoned (rewind 1)");
  expect(JSON.stringify(abandoned.map(([x]) => x)) === "[16,17,18,19,20]", `abandoned steps ${abandoned.map(([x]) => x)}`);
  const api = await (await fetch(`${url}api/runs/${run}`)).json();
  const stored = api.rewinds[0].losses;
  expect(abandoned.every(([x, y], i) => x === stored.step[i] && Math.abs(y - stored.loss[i]) < 1e-12) && abandoned[2][1] === 50,
    `the abandoned line ${JSON.stringify(abandoned)} is not the stored ${JSON.stringify(stored)}`);
  const own = after.labels.indexOf("rank 0"), dim = after.labels.indexOf("abandoned (rewind 1)");
  expect(after.strokes[dim] === after.strokes[own] + "59", `abandoned stroke ${after.strokes[dim]}, rank 0's ${after.strokes[own]}`);
  const ownSteps = drawn(after, "rank 0");
  expect(ownSteps.filter(([x]) => x <= 15).every(([x, y]) => Math.abs(y - (4.0 - 0.1 * x)) < 1e-9),
    `rank 0's steps up to the checkpoint changed: ${JSON.stringify(ownSteps)}`);
  expect(ownSteps.filter(([x]) => x > 15).every(([, y]) => y === 0.05), `rank 0's line still holds abandoned values: ${JSON.stringify(ownSteps)}`);
  const mark = after.marks.find((m) => m.kind === "rewind");
  expect(mark && mark.x === 15 && mark.text.includes("from step 20 back to step 15"), `rewind marks: ${JSON.stringify(after.marks)}`);
  await page.screenshot({ path: `${shots}/rewind.png`, fullPage: false });
  expect(errors.length === 0, `page errors: ${errors.join("; ")}`);
} finally {
  await browser.close();
}
