// The chart controls the run and compare pages share: which x axis, how much smoothing, and
// a log box per chart. Each writes its choice into the page's settings object and calls
// back, so the page redraws and the choice holds across rebuilds.
import { el } from "/api.js";

// choices: [[value, label], ...]
export function xAxisSelect(settings, choices, onchange) {
  const select = el("select", { id: "chart-x", onchange: () => { settings.x = select.value; onchange(); } },
    ...choices.map(([value, label]) => el("option", { value }, label)));
  select.value = settings.x;
  return select;
}

// TensorBoard's slider, 0 to 0.99: only the drawing changes (charts.js's smooth()).
export function smoothingControl(settings, oninput) {
  const value = el("output", { id: "chart-smoothing-value" }, settings.smoothing.toFixed(2));
  const slider = el("input", { type: "range", id: "chart-smoothing", min: 0, max: 0.99, step: 0.01, oninput: () => {
    settings.smoothing = Number(slider.value);
    value.textContent = settings.smoothing.toFixed(2);
    oninput();
  } });
  slider.value = settings.smoothing;
  return el("label", {}, "smoothing ", slider, " ", value);
}

// settings.logY: chart name -> on a log scale.
export function logToggle(settings, name, onchange) {
  return el("label", { class: "log-toggle" }, el("input", { type: "checkbox", id: "log-" + name,
    checked: settings.logY[name] ? "" : null,
    onchange: (e) => { settings.logY[name] = e.target.checked; onchange(); } }), " log");
}
