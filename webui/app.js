// The dashboard's entry: a hash router over the pages, and the colour scheme switch. Each
// page's module is fetched when the page is first shown, so the runs page (the one opened
// first) does not wait for the charts' code (about 200 ms of a 600 ms first paint over
// 10,000 runs, bench/README.md).

let leave = () => {};
let routed = 0;  // counts routes: a page whose module arrives after the next route began is not drawn

async function route() {
  leave();
  leave = () => {};
  const view = document.getElementById("view");
  view.replaceChildren();
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean);
  const mine = ++routed;
  const page = async (module) => {
    const loaded = await import(module);
    return mine === routed ? loaded : null;
  };
  let m;
  if (parts[0] === "run" && parts[1]) {
    if ((m = await page("/run.js"))) leave = m.renderRun(view, decodeURIComponent(parts[1])) || leave;
  } else if (parts[0] === "compare") {
    if ((m = await page("/compare.js"))) m.renderCompare(view, params);
  } else if (parts[0] === "sweep" && parts[1]) {
    if ((m = await page("/sweep.js"))) leave = m.renderSweep(view, decodeURIComponent(parts[1]));
  } else if (parts[0] === "sweeps") {
    if ((m = await page("/sweep.js"))) m.renderSweeps(view);
  } else if ((m = await page("/runs.js"))) {
    leave = m.renderRuns(view, params);
  }
}

function applyTheme(theme) {
  if (theme) document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
}

applyTheme(localStorage.getItem("kiln-theme"));
document.getElementById("theme").addEventListener("click", () => {
  const dark = getComputedStyle(document.documentElement).getPropertyValue("--scheme").trim() === "dark";
  const next = dark ? "light" : "dark";
  localStorage.setItem("kiln-theme", next);
  applyTheme(next);
  route();
});
window.addEventListener("hashchange", route);
route();
