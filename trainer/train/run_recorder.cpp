#include "trainer/train/run_recorder.h"

#include <ctime>
#include <filesystem>
#include <string_view>

#include <fmt/core.h>

#include "base/check.h"
#include "base/human_format.h"
#include "base/run_names.h"

namespace kiln {
namespace {

// System rows are slower-moving than step rows; one every few seconds draws the curve.
constexpr auto kSystemSampleEvery = std::chrono::seconds(5);

// `numbered`: a name taken already becomes NAME-2, NAME-3, ... rather than an error.
int64_t create_run(store::RunWriter& writer, const std::string& name, bool numbered, store::RunInfo& info) {
  info.name = name;
  for (int attempt = 2;; ++attempt) {
    try {
      return writer.create_run(info);
    } catch (const Error& e) {
      // Two default-named runs started in the same second: number the later one.
      const bool taken = std::string_view(e.what()).find("already exists") != std::string_view::npos;
      if (!numbered || !taken || attempt > 100) throw;
      info.name = name + "-" + std::to_string(attempt);
    }
  }
}

}  // namespace

RunRecorder::RunRecorder(const RecordOptions& options, store::RunInfo info, SystemProbe& probe)
    : writer_(options.store_path), probe_(probe), path_(options.store_path) {
  info.command_line = options.command_line;
  info.launch = options.launch;
  info.tags = options.tags;
  info.name = options.name;
  info.parent_name = options.parent_name;
  info.parent_step = options.parent_step;
  info.sweep_id = options.sweep_id;
  info.sweep_point = options.sweep_point;
  // A fork is a new run under its own name, never the continuation of one that has it.
  const bool continuing = !options.resumed_from.empty() && options.parent_name.empty();
  store::ResumeOutcome resumed;
  if (continuing) {
    store::ResumeRequest request;
    request.checkpoint = options.resumed_from;
    request.step = options.resumed_step;
    request.named = options.name_given;
    request.unchanged = options.resumed_unchanged;
    request.force = options.force_resume;
    request.restart = options.restart > 0;
    request.step_seconds = options.resumed_step_seconds;
    resumed = writer_.resume_run(info, request);
  }
  another_training_ = resumed.another_training;
  if (!another_training_.empty()) {
    // Another training from an ended run's checkpoint: recorded apart, as a fork of it.
    info.parent_name = options.name;
    info.parent_step = options.resumed_step;
  }
  continued_ = resumed.run_id.has_value();
  run_id_ = resumed.run_id ? *resumed.run_id
                           : create_run(writer_, options.name, !options.name_given || !another_training_.empty(), info);
  name_ = info.name;
  next_system_sample_ = std::chrono::steady_clock::now();
}

void RunRecorder::log_step(const store::MetricRow& row, std::optional<double> step_seconds) {
  writer_.log_metrics({row}, step_seconds);
  const auto now = std::chrono::steady_clock::now();
  if (row.rank == 0 && now >= next_system_sample_) {
    writer_.log_system({probe_.sample(0)});
    next_system_sample_ = now + kSystemSampleEvery;
  }
}

void RunRecorder::log_valid(int64_t step, double loss) {
  store::ValidRow row;
  row.step = step;
  row.loss = loss;
  writer_.log_valid(row);
}

void RunRecorder::log_samples(std::vector<store::Sample> samples) { writer_.log_samples(std::move(samples)); }

void RunRecorder::log_expert_loads(std::vector<store::ExpertLoad> loads) {
  writer_.log_expert_loads(std::move(loads));
}

void RunRecorder::log_event(std::string_view kind, std::string message, int64_t step) {
  writer_.log_event(kind, std::move(message), step);
}

void RunRecorder::record(const SteeringDecision& decision, int64_t step) {
  for (const CommandOutcome& o : decision.outcomes)
    writer_.mark_command(o.command_id,
                         o.applied ? store::CommandStatus::Applied : store::CommandStatus::Rejected,
                         step, o.reason);
}

void RunRecorder::log_checkpoint(int64_t step, const std::string& path, int64_t bytes,
                                 const std::string& layout, double seconds) {
  writer_.log_checkpoint({step, path, bytes, layout, 0, seconds});
}

void RunRecorder::set_paused(bool paused) {
  writer_.set_status(paused ? store::RunStatus::Paused : store::RunStatus::Running);
}

std::string RunRecorder::finish(store::RunStatus status, const std::string& error) {
  try {
    writer_.finish(status, error);
  } catch (const Error& e) {
    return e.what();
  }
  const store::WriterClose closed = writer_.close();
  if (closed.items_left == 0) return {};
  const std::string what = fmt::format("the run store {} could not take the run's last {} record{} ({})", path_,
                                       closed.items_left, closed.items_left == 1 ? "" : "s", closed.error);
  if (closed.recovery_file.empty()) return what + "; " + closed.recovery_error;
  return what + "; they are saved in " + closed.recovery_file + ": once the store has room, load them with: kiln runs recover " +
         closed.recovery_file;
}

std::string default_run_name(const std::string& config_path) {
  const std::string stem = config_path.empty()
                               ? "tiny"
                               : kiln::run_name_from(std::filesystem::path(config_path).stem().string(), "run");
  return stem + "-" + local_time_text(static_cast<double>(std::time(nullptr)), "%Y%m%d-%H%M%S");
}

}  // namespace kiln
