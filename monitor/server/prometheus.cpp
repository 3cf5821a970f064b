// GET /metrics: the live runs' latest values in Prometheus' text format (version 0.0.4), so
// a Prometheus server can scrape kiln and Grafana chart it with nothing in between.
#include <fmt/core.h>

#include <cmath>
#include <string>
#include <vector>

#include "monitor/server/api_call.h"
#include "store/alert_rows.h"
#include "store/run_details.h"
#include "store/run_queries.h"

namespace kiln::monitor {
namespace {

struct Family {
  const char* name;
  const char* help;
  const char* type;
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

void sample(std::string& out, const char* name, const std::string& labels, double value) {
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

  using Field = double store::MetricRow::*;
  struct RankGauge {
    Family family;
    Field field;
    double scale;
  };
  const RankGauge gauges[] = {
      {{"kiln_loss", "Training loss at the latest logged step.", "gauge"}, &store::MetricRow::loss, 1},
      {{"kiln_learning_rate", "Learning rate at the latest logged step.", "gauge"}, &store::MetricRow::lr, 1},
      {{"kiln_grad_norm", "Gradient norm at the latest logged step.", "gauge"}, &store::MetricRow::grad_norm, 1},
      {{"kiln_tokens_per_second", "Training throughput in tokens per second.", "gauge"},
       &store::MetricRow::tokens_per_s, 1},
      {{"kiln_mfu_ratio", "Model FLOPs utilisation, 0 to 1.", "gauge"}, &store::MetricRow::mfu, 1},
      {{"kiln_step_seconds", "Time of the latest step (forward + backward + optimizer).", "gauge"},
       nullptr, 1e-3},
  };
  std::string out;
  for (const RankGauge& gauge : gauges) {
    header(out, gauge.family);
    for (const auto& d : live)
      for (const auto& row : d.latest) {
        const double value = gauge.field ? row.*gauge.field : row.fwd_ms + row.bwd_ms + row.opt_ms;
        sample(out, gauge.family.name, rank_labels(d.run, row.rank), value * gauge.scale);
      }
  }
  header(out, {"kiln_memory_used_bytes", "Device memory in use at the end of the latest step.", "gauge"});
  for (const auto& d : live)
    for (const auto& row : d.latest)
      if (row.mem_used) sample(out, "kiln_memory_used_bytes", rank_labels(d.run, row.rank), static_cast<double>(*row.mem_used));
  header(out, {"kiln_steps_total", "Highest step logged by the run.", "counter"});
  for (const auto& d : live)
    if (d.run.last_step)
      sample(out, "kiln_steps_total", fmt::format("run=\"{}\"", label(d.run.name)), static_cast<double>(*d.run.last_step));
  header(out, {"kiln_run_paused", "1 while the run is paused, 0 while it trains.", "gauge"});
  for (const auto& d : live)
    sample(out, "kiln_run_paused", fmt::format("run=\"{}\"", label(d.run.name)),
           d.run.status == store::RunStatus::Paused ? 1 : 0);
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
