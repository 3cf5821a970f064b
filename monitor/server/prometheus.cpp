// GET /metrics: the live runs' latest values in Prometheus' text format (version 0.0.4), so
// a Prometheus server can scrape kiln and Grafana chart it with nothing in between.
#include <fmt/core.h>

#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/server/api_call.h"
#include "store/alert_rows.h"
#include "store/metric_fields.h"
#include "store/run_details.h"
#include "store/run_figures.h"
#include "store/run_queries.h"

namespace kiln::monitor {
namespace {

struct Family {
  std::string_view name;
  std::string_view help;
  std::string_view type;
};

// Label values escape backslash, double quote and newline, as the format requires.
std::string label(std::string_view value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

void header(std::string& out, const Family& family) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", family.name, family.help, family.name, family.type);
}

void sample(std::string& out, std::string_view name, const std::string& labels, double value) {
  if (std::isnan(value)) return;
  out += fmt::format("{}{{{}}} {}\n", name, labels, value);
}

std::string rank_labels(const store::RunRecord& run, int rank) {
  return fmt::format("run=\"{}\",rank=\"{}\"", label(run.name), rank);
}

}  // namespace

Reply get_prometheus(ApiCall& call) {
  auto db = call.state.reads().borrow();
  std::vector<store::RunDetails> live;
  for (const auto status : {store::RunStatus::Running, store::RunStatus::Paused}) {
    store::RunFilter filter;
    filter.status = status;
    for (const auto& run : store::list_runs(*db, filter))
      live.push_back(store::run_details(*db, run.id, /*max_events=*/0));
  }

  std::string out;
  // The metric list's gauges (store/metric_fields.h), each rank's latest value.
  for (const store::MetricField& field : store::kMetricFields) {
    if (field.prometheus.empty()) continue;
    header(out, {field.prometheus, field.description, "gauge"});
    for (const auto& d : live)
      for (const auto& row : d.latest)
        sample(out, field.prometheus, rank_labels(d.run, row.rank), store::metric_value(row, field));
  }
  header(out, {"kiln_step_seconds", "Time of the latest step (forward + backward + optimizer).", "gauge"});
  for (const auto& d : live)
    for (const auto& row : d.latest)
      sample(out, "kiln_step_seconds", rank_labels(d.run, row.rank), (row.fwd_ms + row.bwd_ms + row.opt_ms) * 1e-3);
  header(out, {"kiln_steps_total", "Highest step logged by the run.", "counter"});
  for (const auto& d : live)
    if (d.run.last_step)
      sample(out, "kiln_steps_total", fmt::format("run=\"{}\"", label(d.run.name)), static_cast<double>(*d.run.last_step));
  header(out, {"kiln_run_paused", "1 while the run is paused, 0 while it trains.", "gauge"});
  for (const auto& d : live)
    sample(out, "kiln_run_paused", fmt::format("run=\"{}\"", label(d.run.name)),
           d.run.status == store::RunStatus::Paused ? 1 : 0);
  header(out, {"kiln_run_goodput",
               "Share of the run's wall clock spent in steps that survive, 0..1 (docs/resilience.md#goodput).", "gauge"});
  const double now = store::unix_now();
  for (const auto& d : live)
    if (const auto goodput = store::goodput(d.run, now))
      sample(out, "kiln_run_goodput", fmt::format("run=\"{}\"", label(d.run.name)), *goodput);
  header(out, {"kiln_alerts_total", "Alerts the run's rules fired, by rule (docs/alerts.md).", "counter"});
  for (const auto& d : live)
    for (const auto& [rule, count] : store::alert_counts_by_rule(*db, d.run.id))
      sample(out, "kiln_alerts_total", fmt::format("run=\"{}\",rule=\"{}\"", label(d.run.name), label(rule)),
             static_cast<double>(count));
  Reply reply;
  reply.content_type = "text/plain; version=0.0.4; charset=utf-8";
  reply.body = std::move(out);
  return reply;
}

}  // namespace kiln::monitor
