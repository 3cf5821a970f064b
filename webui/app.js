// The dashboard's entry: a hash router over the pages, and the colour scheme switch.
import { renderRuns } from "/runs.js";
import { renderRun } from "/run.js";
import { renderCompare } from "/compare.js";
import { renderSweeps, renderSweep } from "/sweep.js";

let leave = () => {};

function route() {
  leave();
  leave = () => {};
  const view = document.getElementById("view");
  view.replaceChildren();
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean);
  if (parts[0] === "run" && parts[1]) leave = renderRun(view, decodeURIComponent(parts[1])) || leave;
  else if (parts[0] === "compare") renderCompare(view, params);
  else if (parts[0] === "sweep" && parts[1]) leave = renderSweep(view, decodeURIComponent(parts[1]));
  else if (parts[0] === "sweeps") renderSweeps(view);
  else leave = renderRuns(view, params);
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
