// GET /metrics: the live runs' latest values in Prometheus' text format (version 0.0.4), so
// a Prometheus server can scrape kiln and Grafana chart it with nothing in between.
#include <fmt/core.h>

#include <cmath>
#include <map>
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

// A live run's latest rows, its alerts by rule, and the labels that name it: `run`, and with
// several stores `store` too, since two hosts' stores may each hold a run of one name.
struct LiveRun {
  store::RunDetails d;
  std::vector<store::MetricRow> latest;  // every rank's
  std::map<std::string, int64_t> alerts;
  std::string labels;
};

std::string rank_labels(const LiveRun& run, int rank) { return fmt::format("{},rank=\"{}\"", run.labels, rank); }

}  // namespace

Reply get_prometheus(ApiCall& call) {
  const ServedStores& stores = call.state.stores();
  std::vector<LiveRun> live;
  for (size_t i = 0; i < stores.size(); ++i) {
    auto db = stores[i].reads.borrow();
    for (const auto status : {store::RunStatus::Running, store::RunStatus::Paused}) {
      store::RunFilter filter;
      filter.status = status;
      for (const auto& run : store::list_runs(*db, filter)) {
        LiveRun r{store::run_details(*db, run.id, /*max_events=*/0), store::latest_rows_of_every_rank(*db, run.id),
                  store::alert_counts_by_rule(*db, run.id),
                  fmt::format("run=\"{}\"", label(run.name))};
        if (stores.size() > 1) r.labels += fmt::format(",store=\"{}\"", label(stores[i].label));
        live.push_back(std::move(r));
      }
    }
  }

  std::string out;
  // The metric list's gauges (store/metric_fields.h), each rank's latest value.
  for (const store::MetricField& field : store::kMetricFields) {
    if (field.prometheus.empty()) continue;
    header(out, {field.prometheus, field.description, "gauge"});
    for (const auto& r : live)
      for (const auto& row : r.latest)
        sample(out, field.prometheus, rank_labels(r, row.rank), store::metric_value(row, field));
  }
  header(out, {"kiln_step_seconds", "Time of the latest step (forward + backward + optimizer).", "gauge"});
  for (const auto& r : live)
    for (const auto& row : r.latest)
      sample(out, "kiln_step_seconds", rank_labels(r, row.rank), (row.fwd_ms + row.bwd_ms + row.opt_ms) * 1e-3);
  header(out, {"kiln_steps_total", "Highest step logged by the run.", "counter"});
  for (const auto& r : live)
    if (r.d.run.last_step) sample(out, "kiln_steps_total", r.labels, static_cast<double>(*r.d.run.last_step));
  header(out, {"kiln_run_paused", "1 while the run is paused, 0 while it trains.", "gauge"});
  for (const auto& r : live)
    sample(out, "kiln_run_paused", r.labels, r.d.run.status == store::RunStatus::Paused ? 1 : 0);
  header(out, {"kiln_run_goodput",
               "Share of the run's wall clock spent in steps that survive, 0..1 (docs/resilience.md#goodput).", "gauge"});
  const double now = store::unix_now();
  for (const auto& r : live)
    if (const auto goodput = store::goodput(r.d.run, now)) sample(out, "kiln_run_goodput", r.labels, *goodput);
  header(out, {"kiln_alerts_total", "Alerts the run's rules fired, by rule (docs/alerts.md).", "counter"});
  for (const auto& r : live)
    for (const auto& [rule, count] : r.alerts)
      sample(out, "kiln_alerts_total", fmt::format("{},rule=\"{}\"", r.labels, label(rule)),
             static_cast<double>(count));
  Reply reply;
  reply.content_type = "text/plain; version=0.0.4; charset=utf-8";
  reply.body = std::move(out);
  return reply;
}

}  // namespace kiln::monitor
