// The run page's Alerts list (docs/alerts.md): each alert its rules fired, newest first, with
// the rank and host it names and what it measured against its limit. Hidden until one fires;
// the charts mark the same alerts at their steps (as `alert` events).
import { getJson, el, format } from "/api.js";

const shown = 200;  // the newest alerts listed
const number = (x) => (x == null ? "—" : Math.abs(x) >= 1e4 || (x !== 0 && Math.abs(x) < 1e-3) ? x.toExponential(2) : String(+x.toFixed(3)));

export function alertsSection(run) {
  const heading = el("h2", {}, "Alerts");
  const table = el("table", { id: "alerts-table" });
  const element = el("section", { id: "alerts", hidden: "" }, heading, el("div", { class: "table-wrap alerts" }, table));

  function draw(alerts) {
    if (!alerts.length) return;
    element.hidden = false;
    heading.textContent = `Alerts (${alerts.length === shown ? `the newest ${shown}` : alerts.length})`;
    const head = el("tr", {}, ...["time", "step", "rule", "rank", "value", "limit", "action", "message"].map((h) => el("th", {}, h)));
    const rows = [...alerts].reverse().map((a) => el("tr", { "data-rule": a.rule },
      el("td", {}, format.time(a.time)), el("td", { class: "num" }, a.step == null ? "—" : String(a.step)),
      el("td", {}, el("b", { class: "alert-rule" }, a.rule)),
      el("td", {}, a.rank == null ? "—" : `${a.rank}${a.host ? ` on ${a.host}` : ""}`),
      el("td", { class: "num" }, number(a.value)), el("td", { class: "num" }, number(a.threshold)),
      el("td", {}, a.action || "—"), el("td", {}, el("span", { class: "clip wide", title: a.message }, a.message))));
    table.replaceChildren(el("thead", {}, head), el("tbody", {}, ...rows));
  }

  return {
    element,
    async load() {
      draw(await getJson(`/api/runs/${run}/alerts?limit=${shown}`));
    },
  };
}
