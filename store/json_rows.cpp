#include "store/json_rows.h"

#include <cmath>
#include <string>
#include <variant>

#include "base/overloaded.h"
#include "store/expert_load.h"
#include "store/metric_fields.h"
#include "store/run_figures.h"
#include "store/user_text.h"

namespace kiln::store {

using nlohmann::json;

std::string dump_json(const json& value, int indent) {
  return value.dump(indent, ' ', false, json::error_handler_t::replace);
}

json json_number(double value) { return std::isfinite(value) ? json(value) : json(); }

json json_number(const std::optional<double>& value) {
  return value ? json_number(*value) : json();
}

json json_number(const std::optional<int64_t>& value) { return value ? json(*value) : json(); }

json to_json(const RunRecord& run) {
  return {{"id", run.id},
          {"name", run.name},
          {"status", std::string(to_string(run.status))},
          {"stored_status", std::string(to_string(run.stored_status))},
          {"layout", run.layout},
          {"backend", run.backend},
          {"device", run.device},
          {"host", run.host},
          {"command_line", run.command_line},
          {"created_at", json_number(run.created_at)},
          {"started_at", json_number(run.started_at)},
          {"ended_at", json_number(run.ended_at)},
          {"heartbeat_at", json_number(run.heartbeat_at)},
          {"tags", run.tags},
          {"notes", run.notes},
          {"error", run.error},
          {"last_step", json_number(run.last_step)},
          {"planned_step_s", json_number(run.planned_step_s)},
          {"planned_memory_bytes", json_number(run.planned_memory_bytes)},
          {"workdir", run.workdir},
          {"world_size", json_number(run.world_size)},
          {"sweep_id", json_number(run.sweep_id)},
          {"sweep_point", json_number(run.sweep_point)},
          {"parent_id", json_number(run.parent_id)},
          {"parent_step", json_number(run.parent_step)},
          {"step_seconds", json_number(run.step_seconds)},
          {"goodput", json_number(goodput(run, unix_now()))}};
}

json metric_json(const MetricRow& row, const MetricField& field) {
  return std::visit(Overloaded{[&](int64_t MetricRow::*m) { return json(row.*m); },
                               [&](int MetricRow::*m) { return json(row.*m); },
                               [&](auto m) { return json_number(row.*m); }},
                    field.member);
}

json metric_fields_json() {
  constexpr std::pair<MetricView, const char*> kViewNames[] = {
      {kInRunChart, "run_chart"},   {kInCompareGrid, "compare_grid"}, {kInCompareChoice, "compare_choice"},
      {kInTimeSplit, "time_split"}, {kInTimeWithin, "time_within"},   {kInRanks, "ranks"}};
  json out = json::array();
  for (const MetricField& f : kMetricFields) {
    json views = json::array();
    for (const auto& [view, name] : kViewNames)
      if (f.views & view) views.push_back(name);
    out.push_back({{"name", f.name},
                   {"type", is_integer_metric(f) ? "integer" : "real"},
                   {"unit", f.unit},
                   {"ranks", f.spread == RankSpread::PerRank ? "per_rank" : "same"},
                   {"slow", f.spread == RankSpread::PerRank ? json(f.slow == SlowEnd::Low ? "low" : "high") : json()},
                   {"views", std::move(views)},
                   {"title", f.title},
                   {"description", f.description}});
  }
  return out;
}

json to_json(const MetricRow& row) {
  json out = json::object();
  for (const MetricField& f : kMetricFields) out[std::string(f.name)] = metric_json(row, f);
  return out;
}

json config_json(const RunRecord& run) {
  const std::string shown = redact_config_json(run.config_json);
  json config = json::parse(shown, nullptr, false);
  return config.is_discarded() ? json(shown) : config;
}

json to_json(const ValidRow& row) {
  return {{"step", row.step}, {"time", json_number(row.time)}, {"loss", json_number(row.loss)}};
}

json to_json(const SystemRow& row) {
  return {{"rank", row.rank},
          {"time", json_number(row.time)},
          {"gpu_util", json_number(row.gpu_util)},
          {"gpu_mem_used", json_number(row.gpu_mem_used)},
          {"gpu_power_w", json_number(row.gpu_power_w)},
          {"gpu_temp_c", json_number(row.gpu_temp_c)},
          {"cpu_percent", json_number(row.cpu_percent)},
          {"rss_bytes", json_number(row.rss_bytes)},
          {"host_mem_used", json_number(row.host_mem_used)},
          {"host_mem_total", json_number(row.host_mem_total)}};
}

json to_json(const Sample& sample) {
  return {{"step", sample.step},
          {"slot", sample.slot},
          {"time", json_number(sample.time)},
          {"prompt", sample.prompt},
          {"text", sample.text},
          {"temperature", json_number(sample.temperature)}};
}

json to_json(const ExpertLoad& load) {
  return {{"step", load.step},
          {"layer", load.layer},
          {"tokens", load.tokens},
          {"dropped", load.dropped},
          {"aux_loss", json_number(load.aux_loss)},
          {"router_entropy", json_number(load.router_entropy)},
          {"imbalance", json_number(expert_imbalance(load.tokens))}};
}

json to_json(const Event& event) {
  return {{"id", event.id},
          {"time", json_number(event.time)},
          {"step", json_number(event.step)},
          {"kind", event.kind},
          {"message", event.message}};
}

json to_json(const Checkpoint& checkpoint) {
  return {{"step", checkpoint.step},
          {"path", checkpoint.path},
          {"bytes", json_number(checkpoint.bytes)},
          {"layout", checkpoint.layout},
          {"time", json_number(checkpoint.time)},
          {"seconds", json_number(checkpoint.seconds)}};
}

json to_json(const Command& command) {
  return {{"id", command.id},
          {"action", std::string(to_string(command.action))},
          {"argument", command.argument},
          {"status", std::string(to_string(command.status))},
          {"created_at", json_number(command.created_at)},
          {"applied_step", json_number(command.applied_step)},
          {"applied_at", json_number(command.applied_at)},
          {"reason", command.reason}};
}

json to_json(const Rewind& rewind) {
  json steps = json::array(), times = json::array(), losses = json::array();
  for (const RewoundLoss& point : rewind.losses) {
    steps.push_back(point.step);
    times.push_back(json_number(point.time));
    losses.push_back(json_number(point.loss));
  }
  return {{"id", rewind.id},
          {"time", json_number(rewind.time)},
          {"number", rewind.number},
          {"spike_step", rewind.spike_step},
          {"from_step", rewind.from_step},
          {"to_step", rewind.to_step},
          {"checkpoint", rewind.checkpoint},
          {"first_skipped_batch", rewind.first_skipped_batch},
          {"skipped_batches", rewind.skipped_batches},
          {"message", rewind.message},
          {"losses", {{"step", steps}, {"time", times}, {"loss", losses}}}};
}

json to_json(const RunDetails& d) {
  json out = to_json(d.run);
  out["config"] = config_json(d.run);
  const auto rows = [](const auto& items) {
    json array = json::array();
    for (const auto& item : items) array.push_back(to_json(item));
    return array;
  };
  out["latest_metrics"] = rows(d.latest);
  out["latest_ranks"] = d.latest_ranks;
  out["latest_valid"] = d.latest_valid ? to_json(*d.latest_valid) : json();
  out["latest_samples"] = rows(d.latest_samples);
  out["latest_experts"] = rows(d.latest_experts);
  out["events"] = rows(d.events);
  out["checkpoints"] = rows(d.checkpoints);
  out["commands"] = rows(d.commands);
  out["rewinds"] = rows(d.rewinds);
  const auto links = [](const std::vector<LineageLink>& items) {
    json array = json::array();
    for (const LineageLink& l : items)
      array.push_back({{"id", l.id}, {"name", l.name}, {"status", to_string(l.status)}, {"step", l.step}});
    return array;
  };
  out["lineage"] = {{"ancestors", links(d.lineage.ancestors)}, {"forks", links(d.lineage.forks)}};
  return out;
}

}  // namespace kiln::store
