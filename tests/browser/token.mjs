// Drives headless Chromium (Debian's, through playwright-core) through the dashboard of a
// server with a token:
//   node token.mjs URL TOKEN LIVE_RUN
// The server answers reads only with the token. The page asks for it (a wrong one is asked
// for again), trades it for an HttpOnly, SameSite=Strict session cookie, then shows the runs
// table and the live run's chart growing over the WebSocket; Pause, a change, goes with the
// token as its header. Any failed expectation exits non-zero with one line saying which.
import { launchBrowser } from "./launch.mjs";

const [url, token, live] = process.argv.slice(2);
const timeout = 30000;
const expect = (ok, what) => { if (!ok) throw new Error(what); };

const browser = await launchBrowser();
try {
  // Without the token, no read: the page itself is all that is served.
  expect((await fetch(`${url}api/runs`)).status === 401, "GET /api/runs without the token was not 401");
  expect((await fetch(url)).status === 200, "the page itself should load without the token");

  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  // The first answer is wrong, the second right; confirmations (Pause's) are accepted.
  const asked = [];
  const answers = ["not-the-token", token];
  page.on("dialog", (dialog) => {
    if (dialog.type() !== "prompt") return dialog.accept();
    asked.push(dialog.message());
    return dialog.accept(answers.shift() ?? "");
  });

  await page.goto(url);
  await page.locator(`#runs tr[data-run="${live}"]`).waitFor({ timeout });
  expect(asked.length === 2, `asked for the token ${asked.length} times: ${JSON.stringify(asked)}`);
  expect(asked[0] === "This server needs its token:", `first question: ${asked[0]}`);
  expect(asked[1] === "The server refused that token. Its token:", `second question: ${asked[1]}`);
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === `kiln-session-${new URL(url).port}`);
  expect(session, `no session cookie among ${cookies.map((c) => c.name)}`);
  expect(session.httpOnly && session.sameSite === "Strict", `the session cookie: ${JSON.stringify(session)}`);
  expect(!(await page.evaluate(() => document.cookie)).includes("kiln-session"), "page scripts can read the session cookie");

  // The live run's chart grows as rows arrive over the WebSocket, which the cookie let in.
  await page.goto(`${url}#/run/${live}`);
  await page.locator("#chart-loss").waitFor({ timeout });
  const points = async () => Number(await page.locator("#chart-loss").getAttribute("data-points"));
  await page.waitForFunction(() => Number(document.querySelector("#chart-loss")?.dataset.points) > 0, null, { timeout });
  const before = await points();
  await page.waitForFunction((b) => Number(document.querySelector("#chart-loss").dataset.points) > b + 2, before, { timeout });

  // A change goes with the kept token; no question asked again.
  await page.click("#steer-pause");
  await page.waitForFunction(() => document.querySelector("#run-status").textContent === "paused", null, { timeout });
  expect(asked.length === 2, `asked for the token again: ${JSON.stringify(asked)}`);

  // A reload keeps the token and the session: nothing asked.
  await page.reload();
  await page.locator("#chart-loss").waitFor({ timeout });
  expect(asked.length === 2, `a reload asked for the token again: ${JSON.stringify(asked)}`);

  if (errors.length) throw new Error(`page errors: ${errors.join("; ")}`);
  console.log("token: the page asked for the token, then showed the runs, the live chart and paused the run");
} catch (e) {
  console.error(`token test failed: ${e.message.split("\n")[0]}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
