#include "store/export.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "store/commands.h"
#include "store/json_rows.h"
#include "store/metric_queries.h"
#include "store/run_queries.h"
#include "store/sample_queries.h"

namespace kiln::store {
namespace {

// CSV fields: shortest text that reads back as the same double; empty when absent.
void csv_number(std::string& line, double v) {
  line += ',';
  if (!std::isnan(v)) fmt::format_to(std::back_inserter(line), "{}", v);
}
void csv_number(std::string& line, const std::optional<int64_t>& v) {
  line += ',';
  if (v) fmt::format_to(std::back_inserter(line), "{}", *v);
}

std::string csv_text(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char c : s) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

// Writes "key": [rows...] one row per line.
template <typename Rows>
void json_array(std::ostream& out, const char* key, const Rows& rows) {
  out << ",\n\"" << key << "\": [";
  bool first = true;
  for (const auto& row : rows) {
    out << (first ? "\n" : ",\n") << dump_json(to_json(row));
    first = false;
  }
  out << "]";
}

}  // namespace

void write_metrics_csv(Database& db, int64_t run_id, std::ostream& out) {
  const std::string run = csv_text(get_run(db, run_id).name);
  out << kMetricsCsvHeader << '\n';
  std::string line;
  for_each_metric(db, run_id, [&](const MetricRow& r) {
    line = fmt::format("{},{},{}", run, r.step, r.rank);
    csv_number(line, r.time);
    csv_number(line, std::optional<int64_t>(r.tokens));
    csv_number(line, r.loss);
    csv_number(line, r.lr);
    csv_number(line, r.grad_norm);
    csv_number(line, r.tokens_per_s);
    csv_number(line, r.tflops);
    csv_number(line, r.mfu);
    csv_number(line, r.mem_used);
    csv_number(line, r.mem_peak);
    csv_number(line, r.fwd_ms);
    csv_number(line, r.bwd_ms);
    csv_number(line, r.opt_ms);
    csv_number(line, r.comm_ms);
    csv_number(line, r.data_ms);
    csv_number(line, r.loss_scale);
    csv_number(line, std::optional<int64_t>(r.skipped_steps));
    line += '\n';
    out << line;
  });
}

void write_run_json(Database& db, int64_t run_id, std::ostream& out) {
  const RunRecord run = get_run(db, run_id);
  nlohmann::json record = to_json(run);
  record["config"] = config_json(run);
  out << "{\"run\": " << dump_json(record);
  out << ",\n\"metrics\": [";
  bool first = true;
  for_each_metric(db, run_id, [&](const MetricRow& r) {
    out << (first ? "\n" : ",\n") << dump_json(to_json(r));
    first = false;
  });
  out << "]";
  json_array(out, "valid", list_valid(db, run_id));
  json_array(out, "samples", list_samples(db, run_id, std::numeric_limits<size_t>::max()));
  json_array(out, "system", list_system(db, run_id));
  json_array(out, "events", list_events(db, run_id));
  json_array(out, "checkpoints", list_checkpoints(db, run_id));
  json_array(out, "commands", list_commands(db, run_id));
  out << "}\n";
}

}  // namespace kiln::store
