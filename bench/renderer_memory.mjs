// The resident memory of a headless Chromium's processes, for the dashboard's page benchmarks
// (runs_page_memory.mjs, pages_timing.mjs).
import { readFileSync } from "node:fs";

// Resident bytes of this browser's processes (Chromium names them, with their kinds): the
// page's renderer (the renderer with the most anonymous memory: the others are spare ones
// Chromium keeps started), whole and its anonymous part alone (the rest is Chromium's code
// and fonts, mapped from files and shared with the other processes), and all of Chromium's
// processes together (the browser, GPU, utility and spare renderers too; shared pages count
// once a process, so an upper bound).
export async function residentBytes(browser) {
  const cdp = await browser.newBrowserCDPSession();
  const { processInfo } = await cdp.send("SystemInfo.getProcessInfo");
  const field = (pid, name) => {
    try {
      return 1024 * Number(new RegExp(`${name}:\\s+(\\d+)`).exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
    } catch {
      return 0;  // gone since
    }
  };
  const renderers = processInfo.filter((p) => p.type === "renderer")
    .map((p) => ({ rss: field(p.id, "VmRSS"), anon: field(p.id, "RssAnon") })).sort((a, b) => b.anon - a.anon);
  return { page: renderers[0] ?? { rss: 0, anon: 0 }, all: processInfo.reduce((total, p) => total + field(p.id, "VmRSS"), 0) };
}
