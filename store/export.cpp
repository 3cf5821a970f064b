#include "store/export.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "store/commands.h"
#include "store/metric_queries.h"
#include "store/run_queries.h"

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

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }
template <typename T>
nlohmann::json number(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

nlohmann::json to_json(const MetricRow& r) {
  return {{"step", r.step},          {"rank", r.rank},
          {"time", number(r.time)},  {"tokens", r.tokens},
          {"loss", number(r.loss)},  {"lr", number(r.lr)},
          {"grad_norm", number(r.grad_norm)}, {"tokens_per_s", number(r.tokens_per_s)},
          {"tflops", number(r.tflops)},       {"mfu", number(r.mfu)},
          {"mem_used", number(r.mem_used)},   {"mem_peak", number(r.mem_peak)},
          {"fwd_ms", number(r.fwd_ms)},       {"bwd_ms", number(r.bwd_ms)},
          {"opt_ms", number(r.opt_ms)},       {"comm_ms", number(r.comm_ms)},
          {"data_ms", number(r.data_ms)},     {"loss_scale", number(r.loss_scale)},
          {"skipped_steps", r.skipped_steps}};
}

nlohmann::json to_json(const RunRecord& r) {
  auto config = nlohmann::json::parse(r.config_json, nullptr, false);
  if (config.is_discarded()) config = r.config_json;  // keep text that is not JSON as text
  return {{"id", r.id},
          {"name", r.name},
          {"status", std::string(to_string(r.status))},
          {"config", config},
          {"layout", r.layout},
          {"backend", r.backend},
          {"device", r.device},
          {"host", r.host},
          {"command_line", r.command_line},
          {"created_at", r.created_at},
          {"started_at", number(r.started_at)},
          {"ended_at", number(r.ended_at)},
          {"heartbeat_at", number(r.heartbeat_at)},
          {"tags", r.tags},
          {"notes", r.notes},
          {"error", r.error}};
}

// Writes "key": [rows...] one row per line.
template <typename Rows, typename ToJson>
void json_array(std::ostream& out, const char* key, const Rows& rows, ToJson to_json_row) {
  out << ",\n\"" << key << "\": [";
  bool first = true;
  for (const auto& row : rows) {
    out << (first ? "\n" : ",\n") << to_json_row(row).dump();
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
  out << "{\"run\": " << to_json(get_run(db, run_id)).dump();
  out << ",\n\"metrics\": [";
  bool first = true;
  for_each_metric(db, run_id, [&](const MetricRow& r) {
    out << (first ? "\n" : ",\n") << to_json(r).dump();
    first = false;
  });
  out << "]";
  json_array(out, "valid", list_valid(db, run_id), [](const ValidRow& v) {
    return nlohmann::json{{"step", v.step}, {"time", number(v.time)}, {"loss", number(v.loss)}};
  });
  json_array(out, "system", list_system(db, run_id), [](const SystemRow& s) {
    return nlohmann::json{{"rank", s.rank},
                          {"time", number(s.time)},
                          {"gpu_util", number(s.gpu_util)},
                          {"gpu_mem_used", number(s.gpu_mem_used)},
                          {"gpu_power_w", number(s.gpu_power_w)},
                          {"gpu_temp_c", number(s.gpu_temp_c)},
                          {"cpu_percent", number(s.cpu_percent)},
                          {"rss_bytes", number(s.rss_bytes)}};
  });
  json_array(out, "events", list_events(db, run_id), [](const Event& e) {
    return nlohmann::json{{"id", e.id},       {"time", e.time},
                          {"step", number(e.step)}, {"kind", e.kind},
                          {"message", e.message}};
  });
  json_array(out, "checkpoints", list_checkpoints(db, run_id), [](const Checkpoint& c) {
    return nlohmann::json{{"step", c.step},   {"path", c.path}, {"bytes", number(c.bytes)},
                          {"layout", c.layout}, {"time", c.time}};
  });
  json_array(out, "commands", list_commands(db, run_id), [](const Command& c) {
    return nlohmann::json{{"id", c.id},
                          {"created_at", c.created_at},
                          {"action", std::string(to_string(c.action))},
                          {"argument", c.argument},
                          {"status", std::string(to_string(c.status))},
                          {"applied_step", number(c.applied_step)},
                          {"applied_at", number(c.applied_at)},
                          {"reason", c.reason}};
  });
  out << "}\n";
}

}  // namespace kiln::store
