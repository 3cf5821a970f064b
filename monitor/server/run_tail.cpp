#include "monitor/server/run_tail.h"

#include <limits>

#include "monitor/server/api_reply.h"
#include "monitor/server/run_address.h"
#include "monitor/server/server_limits.h"
#include "monitor/server/spread_json.h"
#include "store/expert_queries.h"
#include "store/json_rows.h"
#include "store/metric_spread.h"
#include "store/rewind_rows.h"
#include "store/run_queries.h"
#include "store/sample_queries.h"

namespace kiln::monitor {

using nlohmann::json;

namespace {

// A run samples once per validation, which takes far longer than a poll's 200 ms, so a poll
// finds one or two; the bound keeps a message's size known (up to 100 x 32 KiB) whatever
// the store holds, and past it the newest go out, as a reloading page would show them.
constexpr size_t kMaxSamplesPerPoll = 100;

}  // namespace

RunTail::RunTail(store::Database& db, const ServedStore& store, int64_t run_id) : store_(store), run_id_(run_id) {
  store::ReadSnapshot snapshot(db);
  const store::RunRecord run = store::get_run(db, run_id);
  run_ = record_json(run);
  last_step_ = run.last_step;
  const auto valid = store::list_valid(db, run_id);
  if (!valid.empty()) last_valid_step_ = valid.back().step;
  const auto samples = store::list_samples(db, run_id, 1);
  if (!samples.empty()) last_sample_step_ = samples.back().step;
  last_expert_step_ = store::last_expert_step(db, run_id);
  for (const auto& row : store::list_system(db, run_id))
    last_system_time_ = std::max(last_system_time_, row.time);
  const auto events = store::list_events(db, run_id);
  if (!events.empty()) last_event_id_ = events.back().id;
  rewinds_ = store::rewind_count(db, run_id);
}

json RunTail::record_json(const store::RunRecord& run) const {
  json record = store::to_json(run);
  address_run(record, store_);
  return record;
}

void RunTail::back_to(int64_t step) {
  for (std::optional<int64_t>* last : {&last_step_, &last_valid_step_, &last_sample_step_, &last_expert_step_})
    if (*last && **last > step) *last = step;
}

std::string RunTail::hello() const {
  return dump_json({{"type", "hello"},
                    {"run", run_},
                    {"last_step", store::json_number(last_step_)},
                    {"last_valid_step", store::json_number(last_valid_step_)},
                    {"last_sample_step", store::json_number(last_sample_step_)},
                    {"last_expert_step", store::json_number(last_expert_step_)},
                    {"last_system_time", last_system_time_},
                    {"last_event_id", last_event_id_}});
}

std::vector<std::string> RunTail::poll(store::Database& db) {
  std::vector<std::string> messages;
  store::ReadSnapshot snapshot(db);
  const store::RunRecord run = store::get_run(db, run_id_);

  // First the rewinds: the rows read below, past each one's step, were trained after it.
  if (store::rewind_count(db, run_id_) > rewinds_) {
    const std::vector<store::Rewind> rewinds = store::list_rewinds(db, run_id_);
    for (size_t i = static_cast<size_t>(rewinds_); i < rewinds.size(); ++i) {
      messages.push_back(dump_json({{"type", "rewind"}, {"rewind", store::to_json(rewinds[i])}}));
      back_to(rewinds[i].to_step);
    }
    rewinds_ = static_cast<int64_t>(rewinds.size());
  }

  if (run.last_step && (!last_step_ || *run.last_step > *last_step_)) {
    // Each step by its own rank count (store/metric_spread.h): a narrow step's rows of every
    // rank, a wide one's rank 0 row and its spread across ranks as the store keeps it, so a
    // message stays a few kB a step whatever the world size. A run that turns wide mid-stream
    // (resumed on more ranks) does so at its first wide step: the steps before it went out
    // whole, and from its first spread a client draws the run as the REST API answers a wide
    // one (rank 0's series and the spread). A narrow step after a wide one comes whole: no
    // spread stands for its ranks.
    json rows = json::array();
    const int64_t first = last_step_ ? *last_step_ + 1 : std::numeric_limits<int64_t>::min();
    const int64_t last = std::numeric_limits<int64_t>::max();
    const size_t wide = store::for_each_row_beside_spread(
        db, run_id_, [&](const store::MetricRow& row) { rows.push_back(store::to_json(row)); }, first, last);
    last_step_ = run.last_step;
    json message = {{"type", "metrics"}, {"rows", std::move(rows)}};
    if (wide > 0) message["spread"] = step_spreads_json(db, run_id_, first, last);
    if (!message["rows"].empty() || wide > 0) messages.push_back(dump_json(message));
  }

  json valid = json::array();
  const int64_t after = last_valid_step_ ? *last_valid_step_ : std::numeric_limits<int64_t>::min();
  for (const auto& row : store::list_valid(db, run_id_, after)) {
    valid.push_back(store::to_json(row));
    last_valid_step_ = row.step;
  }
  if (!valid.empty()) messages.push_back(dump_json({{"type", "valid"}, {"rows", valid}}));

  json samples = json::array();
  const int64_t after_sample = last_sample_step_ ? *last_sample_step_ : std::numeric_limits<int64_t>::min();
  for (const auto& sample : store::list_samples(db, run_id_, kMaxSamplesPerPoll, after_sample)) {
    samples.push_back(store::to_json(sample));
    last_sample_step_ = sample.step;
  }
  if (!samples.empty()) messages.push_back(dump_json({{"type", "samples"}, {"rows", samples}}));

  // A run logs its loads with its metrics, so a poll finds a step or a few; past the bound
  // the newest whole steps go out and a reloading page reads the rest over the API.
  json experts = json::array();
  const int64_t after_expert = last_expert_step_ ? *last_expert_step_ : std::numeric_limits<int64_t>::min();
  for (const auto& load : store::expert_loads_after(db, run_id_, after_expert, limits::kMaxExpertRowsPerPoll)) {
    experts.push_back(store::to_json(load));
    last_expert_step_ = load.step;
  }
  if (!experts.empty()) messages.push_back(dump_json({{"type", "experts"}, {"rows", experts}}));

  json system = json::array();
  double newest = last_system_time_;
  for (const auto& row : store::list_system(db, run_id_, last_system_time_)) {
    if (row.time <= last_system_time_) continue;
    system.push_back(store::to_json(row));
    newest = std::max(newest, row.time);
  }
  last_system_time_ = newest;
  if (!system.empty()) messages.push_back(dump_json({{"type", "system"}, {"rows", system}}));

  json events = json::array();
  for (const auto& event : store::list_events(db, run_id_, last_event_id_)) {
    events.push_back(store::to_json(event));
    last_event_id_ = event.id;
  }
  if (!events.empty()) messages.push_back(dump_json({{"type", "events"}, {"events", events}}));

  json record = record_json(run);
  if (record["status"] != run_["status"] || record["ended_at"] != run_["ended_at"])
    messages.push_back(dump_json({{"type", "status"}, {"run", record}}));
  run_ = std::move(record);
  return messages;
}

}  // namespace kiln::monitor
