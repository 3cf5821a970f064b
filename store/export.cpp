#include "store/export.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>

#include "base/overloaded.h"
#include "store/commands.h"
#include "store/expert_load.h"
#include "store/expert_queries.h"
#include "store/json_rows.h"
#include "store/metric_queries.h"
#include "store/rows.h"
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

const std::string& metrics_csv_header() {
  static const std::string header = [] {
    std::string out = "run";
    for (const MetricField& f : kMetricFields) out += "," + std::string(f.name);
    return out;
  }();
  return header;
}

void append_metrics_csv_line(std::string& out, const std::string& run, const MetricRow& r) {
  out += csv_text(run);
  for (const MetricField& f : kMetricFields)
    std::visit(Overloaded{[&](int64_t MetricRow::*m) { fmt::format_to(std::back_inserter(out), ",{}", r.*m); },
                          [&](int MetricRow::*m) { fmt::format_to(std::back_inserter(out), ",{}", r.*m); },
                          [&](double MetricRow::*m) { csv_number(out, r.*m); },
                          [&](std::optional<int64_t> MetricRow::*m) { csv_number(out, r.*m); }},
               f.member);
  out += '\n';
}

void write_metrics_csv(Database& db, int64_t run_id, std::ostream& out) {
  const std::string run = get_run(db, run_id).name;
  out << metrics_csv_header() << '\n';
  std::string line;
  for_each_metric(db, run_id, [&](const MetricRow& r) {
    line.clear();
    append_metrics_csv_line(line, run, r);
    out << line;
  });
}

void write_metrics_jsonl(Database& db, int64_t run_id, std::ostream& out) {
  for_each_metric(db, run_id, [&](const MetricRow& r) { out << dump_json(to_json(r)) << '\n'; });
  for (const ValidRow& v : list_valid(db, run_id))
    out << dump_json({{"step", v.step}, {"time", json_number(v.time)}, {"valid_loss", json_number(v.loss)}}) << '\n';
}

MetricsCsvPages::MetricsCsvPages(Database& db, int64_t run_id) : run_id_(run_id), run_(get_run(db, run_id).name) {}

std::string MetricsCsvPages::next(Database& db, size_t rows) {
  if (!header_written_) {
    header_written_ = true;
    return std::string(metrics_csv_header()) + '\n';
  }
  // The rows after the last one written, in primary-key order: `step >= ?2` walks the key
  // from there, the rest skips that step's ranks already written.
  static const std::string sql = "SELECT " + metric_column_list() +
                                 " FROM metrics WHERE run_id = ?1 AND step >= ?2 AND (step > ?2 OR rank > ?3) "
                                 "ORDER BY step, rank LIMIT ?4";
  Statement& st = db.cached(sql);
  std::string page;
  st.bind_all(run_id_, step_, rank_, static_cast<int64_t>(rows));
  while (st.step()) {
    const MetricRow row = read_metric(st);
    append_metrics_csv_line(page, run_, row);
    step_ = row.step;
    rank_ = row.rank;
  }
  st.reset();
  return page;
}

void write_experts_csv(Database& db, int64_t run_id, std::ostream& out) {
  const std::string run = csv_text(get_run(db, run_id).name);
  out << kExpertsCsvHeader << '\n';
  std::string lines;
  for_each_expert_load(db, run_id, [&](const ExpertLoad& load) {
    lines.clear();
    std::string layer_figures;
    csv_number(layer_figures, load.aux_loss);
    csv_number(layer_figures, load.router_entropy);
    csv_number(layer_figures, expert_imbalance(load.tokens));
    for (size_t e = 0; e < load.tokens.size(); ++e) {
      const int64_t dropped = load.dropped.empty() ? 0 : load.dropped[e];
      fmt::format_to(std::back_inserter(lines), "{},{},{},{},{},{}{}\n", run, load.step, load.layer, e,
                     load.tokens[e], dropped, layer_figures);
    }
    out << lines;
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
  out << ",\n\"experts\": [";
  first = true;
  for_each_expert_load(db, run_id, [&](const ExpertLoad& load) {
    out << (first ? "\n" : ",\n") << dump_json(to_json(load));
    first = false;
  });
  out << "]";
  json_array(out, "system", list_system(db, run_id));
  json_array(out, "events", list_events(db, run_id));
  json_array(out, "checkpoints", list_checkpoints(db, run_id));
  json_array(out, "commands", list_commands(db, run_id));
  out << "}\n";
}

}  // namespace kiln::store
