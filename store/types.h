// The rows of the run store as C++ values: what the trainer hands the writer and what the
// queries hand back. Column meanings and units are in docs/store.md.
//
// Absent values: a double that is NaN is stored as SQL NULL and reads back as NaN (SQLite
// itself turns a bound NaN into NULL), so a NaN loss is "no value"; the trainer records the
// NaN itself as a `nan` event. Integers that may be unknown are std::optional.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::store {

inline constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();

// Seconds since the Unix epoch, as a double (every time column in the store).
double unix_now();

// Released: checkpointed and ended to free its devices, to be resumed (`kiln runs release`).
enum class RunStatus { Created, Running, Paused, Completed, Stopped, Failed, Lost, Released };
std::string_view to_string(RunStatus status);
// "running" -> Running; anything else is a kiln::Error naming the valid statuses.
RunStatus parse_run_status(std::string_view text);
// Completed, stopped, failed and released runs have ended (a released one may be resumed);
// created, running and paused ones have not.
// (Lost is a reading of a running run whose heartbeat went stale, not a stored end.)
bool is_terminal(RunStatus status);

// Release: checkpoint, then end the run as `released` (docs/runs.md).
enum class CommandAction { Pause, Resume, Stop, Checkpoint, Set, Release };
std::string_view to_string(CommandAction action);
CommandAction parse_command_action(std::string_view text);

enum class CommandStatus { Pending, Applied, Rejected };
std::string_view to_string(CommandStatus status);
CommandStatus parse_command_status(std::string_view text);

// How a run was launched beyond its config: the dashboard it served beside the training.
// `kiln runs resume` and `kiln runs fork` start the run again with it (docs/runs.md), so it is
// recorded as data, never rebuilt from the command line's text. It holds whether the
// dashboard had a token, never the token.
struct RunLaunch {
  std::string serve;                       // --serve HOST:PORT; empty: no dashboard
  std::vector<std::string> allowed_hosts;  // --allow-host, each
  int64_t max_connections = 0;             // --max-connections (with serve)
  int64_t max_subscribers = 0;             // --max-subscribers (with serve)
  bool token = false;                      // the dashboard required a token
  bool operator==(const RunLaunch&) const = default;
};

// What a run is, given once when it starts.
struct RunInfo {
  std::string name;                 // unique in the store; user_text.h's check_run_name
  std::string config_json = "{}";   // the resolved config, as JSON text
  std::string layout;               // parallel layout, e.g. "tp2.pp1.dp4"
  std::string backend;              // "cpu", "cuda"
  std::string device;               // e.g. "NVIDIA H100 80GB HBM3" or the CPU model
  std::string host;                 // host name of rank 0
  std::string command_line;         // the kiln command as typed (stored with its secrets redacted)
  int64_t pid = 0;                  // the recording process on `host`; 0: not known
  std::vector<std::string> tags;
  std::string notes;
  // The run's own layout as the planner sees it (kiln plan): its predicted step on this
  // device, and rank 0's planned memory. kNoValue / nullopt: not planned (an unknown GPU).
  double planned_step_s = kNoValue;
  std::optional<int64_t> planned_memory_bytes;
  std::string workdir;             // the folder the command ran in
  std::optional<int64_t> world_size;  // how many processes (ranks) it runs as
  // A fork (kiln runs fork, or kiln train --resume CHECKPOINT --name NEW): the run whose
  // checkpoint it starts from, by name, and that checkpoint's step. Empty: not a fork.
  std::string parent_name;
  std::optional<int64_t> parent_step;
  // A sweep's point (kiln sweep): the sweep's id and the point's index.
  std::optional<int64_t> sweep_id;
  std::optional<int64_t> sweep_point;
  // How it was launched; nullopt: not known (the run is then relaunched without a dashboard).
  std::optional<RunLaunch> launch;
};

// Where one rank of a run runs.
struct RankPlace {
  int rank = 0;
  std::string host;
  std::string device;  // "cpu", or "cuda:N" on that host
  std::optional<int64_t> pid;
};

// One firing of an alert rule (docs/alerts.md). The writer also records it as an `alert`
// event, so every view that shows events shows it.
struct Alert {
  int64_t id = 0;  // set by the store
  double time = 0;  // 0: stamped when written
  std::optional<int64_t> step;
  std::string rule;                 // nan, loss_spike, grad_spike, throughput, straggler, stall, memory
  std::optional<int> rank;          // the rank it names; nullopt: the whole run
  double value = kNoValue;          // what was measured
  double threshold = kNoValue;      // the limit it crossed
  std::string message;              // one line
  std::string action;               // pause, checkpoint, stop, rewind, or empty
};

// One loss value of rank 0 at a step a rewind abandoned (the metrics table then holds the
// steps trained again in its place).
struct RewoundLoss {
  int64_t step = 0;
  double time = 0;  // when it was logged
  double loss = kNoValue;
};

// A rewind past a loss spike (alerts.actions loss_spike=rewind, docs/resilience.md): the run
// went back to the newest checkpoint before the spike and skipped the next batches of its
// data. Batches are global batches, numbered from 1 as a run that never skipped trains them
// (its step N trains batch N).
struct Rewind {
  int64_t id = 0;     // set by the store
  double time = 0;    // 0: stamped when written
  int number = 0;     // 1 for the run's first rewind, 2 for its second, ...
  int64_t spike_step = 0;  // the step whose loss spiked
  int64_t from_step = 0;   // the last step trained before going back
  int64_t to_step = 0;     // the checkpoint's step the run went back to; it goes on at to_step + 1
  std::string checkpoint;  // that checkpoint's folder
  int64_t first_skipped_batch = 0;  // the first batch of the data skipped
  int64_t skipped_batches = 0;      // how many (alerts.rewind_skip); 0: none
  std::string message;              // one line, as the `rewind` event says it
  std::vector<RewoundLoss> losses;  // rank 0's logged losses of steps to_step + 1..from_step
};

// One rank's measurements for one logged step. Times are milliseconds, memory is bytes.
struct MetricRow {
  int64_t step = 0;
  int rank = 0;
  double time = 0;                  // unix seconds; 0: the writer stamps the time it was queued
  int64_t tokens = 0;               // tokens consumed by the whole run up to this step
  double loss = kNoValue;
  double lr = kNoValue;
  double grad_norm = kNoValue;
  double tokens_per_s = kNoValue;   // the whole run's throughput, as this rank measured it
  double tflops = kNoValue;         // model TFLOP/s achieved by this rank's device
  double mfu = kNoValue;            // model FLOPs utilisation, 0..1
  double fwd_ms = kNoValue;
  double bwd_ms = kNoValue;
  double opt_ms = kNoValue;
  double comm_ms = kNoValue;        // exposed (not overlapped) communication
  double data_ms = kNoValue;        // waiting for the next batch
  double a2a_ms = kNoValue;         // of fwd_ms and bwd_ms, expert parallelism's all-to-alls
  double shard_ms = kNoValue;       // of fwd_ms and bwd_ms, sharded units' gathers and reductions
  double pipe_ms = kNoValue;        // of fwd_ms and bwd_ms, a pipeline stage waiting for its neighbours
  std::optional<int64_t> mem_used;  // device memory in use at the end of the step
  std::optional<int64_t> mem_peak;  // peak device memory so far
  double loss_scale = kNoValue;     // fp16 dynamic loss scale
  int64_t skipped_steps = 0;        // optimizer steps skipped (overflow) so far
  std::optional<int64_t> trained_tokens;  // the step's targets trained on (not masked)
  // Multi-token prediction's loss at each depth (model.mtp_depth): the mean over the depth's
  // own targets; absent past the run's depth.
  double mtp1_loss = kNoValue;
  double mtp2_loss = kNoValue;
  double mtp3_loss = kNoValue;
  double mtp4_loss = kNoValue;
};

// The depths' loss members in order: model.mtp_depth is at most their count.
inline constexpr double MetricRow::* kMtpLossMembers[] = {&MetricRow::mtp1_loss, &MetricRow::mtp2_loss,
                                                         &MetricRow::mtp3_loss, &MetricRow::mtp4_loss};

struct ValidRow {
  int64_t step = 0;
  double time = 0;  // 0: stamped when queued
  double loss = kNoValue;
};

// Per-rank machine readings; any field may be absent (no GPU, no NVML).
struct SystemRow {
  int rank = 0;
  double time = 0;  // 0: stamped when queued
  double gpu_util = kNoValue;        // percent, 0..100
  std::optional<int64_t> gpu_mem_used;  // bytes
  double gpu_power_w = kNoValue;     // watts
  double gpu_temp_c = kNoValue;      // degrees Celsius
  double cpu_percent = kNoValue;     // process CPU, percent of one core (may exceed 100)
  std::optional<int64_t> rss_bytes;  // process resident memory
  std::optional<int64_t> host_mem_used;   // the machine's memory in use (total - available)
  std::optional<int64_t> host_mem_total;  // the machine's memory
};

// Text the model generated at a validation step, from the config's sample prompt, so its
// progress can be read as well as plotted. The writer keeps the prompt and the text up to
// kMaxSampleBytes each, so a queue of them stays bounded whatever train.sample_tokens says.
inline constexpr size_t kMaxSampleBytes = 16 * 1024;
// The prompts sampled at one step (the config's list is bounded the same: SamplePrompts::kMax).
inline constexpr size_t kMaxSamplesPerStep = 16;
struct Sample {
  int64_t step = 0;
  int slot = 0;  // the prompt's place in train.sample_prompt
  double time = 0;  // 0: stamped when queued
  std::string prompt;
  std::string text;  // what the model wrote after the prompt
  double temperature = kNoValue;
};

// One MoE layer's routing over one logged step (summed over the step's micro-batches and the
// data-parallel ranks): how many token assignments each expert received (top_k per token),
// how many of them were dropped by a capacity limit, the load-balancing auxiliary loss and the
// router's mean entropy (nats) over the tokens. RunWriter::log_expert_loads refuses a layer
// index outside [0, kMaxExpertLayers), more than kMaxExpertsPerLayer experts, or counts that
// are negative, so one step's loads stay within 512 x 1024 counts whatever the model says.
inline constexpr int kMaxExpertLayers = 512;
inline constexpr size_t kMaxExpertsPerLayer = 1024;
struct ExpertLoad {
  int64_t step = 0;
  int layer = 0;                  // the model's layer index (0-based)
  std::vector<int64_t> tokens;    // per expert
  std::vector<int64_t> dropped;   // per expert (all zero when dropless); read back empty then
  double aux_loss = kNoValue;
  double router_entropy = kNoValue;
};

// Known event kinds; the column is open text, so later kinds need no migration.
namespace event_kind {
inline constexpr std::string_view kStart = "start";
inline constexpr std::string_view kEnd = "end";
inline constexpr std::string_view kCheckpoint = "checkpoint";
inline constexpr std::string_view kCommand = "command";
inline constexpr std::string_view kNan = "nan";
inline constexpr std::string_view kError = "error";
inline constexpr std::string_view kDropped = "dropped";
inline constexpr std::string_view kStatus = "status";
inline constexpr std::string_view kAlert = "alert";
// kiln train --max-restarts started the run again after a failure (launch/supervised_run.h).
inline constexpr std::string_view kRestart = "restart";
// Rows a recovery file brought in after the run ended (run_recovery.h, kiln runs recover).
inline constexpr std::string_view kRecovered = "recovered";
// A rewind past a loss spike (store/rewind_rows.h); its step is the step the run went back to.
inline constexpr std::string_view kRewind = "rewind";
}  // namespace event_kind

struct Event {
  int64_t id = 0;  // set by the store
  double time = 0;
  std::optional<int64_t> step;
  std::string kind;
  std::string message;
};

struct Checkpoint {
  int64_t step = 0;
  std::string path;
  std::optional<int64_t> bytes;
  std::string layout;  // the layout it was written under
  double time = 0;     // 0: stamped when queued
  std::optional<double> seconds;  // how long training stood still for it; nullopt: not measured
};

struct Command {
  int64_t id = 0;
  int64_t run_id = 0;
  double created_at = 0;
  CommandAction action = CommandAction::Pause;
  std::string argument;  // for set: "train.lr=1e-4"; empty otherwise
  CommandStatus status = CommandStatus::Pending;
  std::optional<int64_t> applied_step;
  std::optional<double> applied_at;
  std::string reason;
};

// A run's place among forks (store/lineage.h): one run it descends from, or one started
// from it.
struct LineageLink {
  int64_t id = 0;
  std::string name;
  RunStatus status = RunStatus::Created;  // effective (a stale live run reads as lost)
  int64_t step = 0;  // the step of this run's checkpoint the younger run started from
};

struct Lineage {
  std::vector<LineageLink> ancestors;  // the parent first, then its parent, ...
  std::vector<LineageLink> forks;      // the runs started from this one, oldest first
};

// A run as read back. `status` is the effective status: a running or paused run whose
// heartbeat is older than the staleness threshold reads as Lost.
struct RunRecord {
  int64_t id = 0;
  std::string name;
  RunStatus status = RunStatus::Created;
  RunStatus stored_status = RunStatus::Created;  // what the row says
  std::string config_json;
  std::string layout;
  std::string backend;
  std::string device;
  std::string host;
  std::string command_line;
  std::optional<int64_t> pid;  // the recording process on `host`, while it runs
  double created_at = 0;
  std::optional<double> started_at;
  std::optional<double> ended_at;
  std::optional<double> heartbeat_at;
  std::vector<std::string> tags;
  std::string notes;
  std::string error;
  std::optional<int64_t> last_step;  // the highest logged step, if any
  double planned_step_s = kNoValue;             // RunInfo's: the planner's step, seconds
  std::optional<int64_t> planned_memory_bytes;  // RunInfo's: rank 0's planned bytes
  std::string workdir;                          // RunInfo's
  std::optional<int64_t> world_size;
  std::optional<int64_t> sweep_id;
  std::optional<int64_t> sweep_point;
  std::optional<int64_t> parent_id;    // a fork's parent run
  std::optional<int64_t> parent_step;  // and the parent's step it started from
  // RunInfo's launch as the store holds it, JSON text (store/run_launch.h reads it, strictly);
  // empty: not recorded (a run recorded before schema 8).
  std::string launch_json;
  // Goodput's parts (store/run_figures.h goodput): the seconds spent in steps that survive, as
  // of the newest logged step (nullopt: none logged, or recorded before schema 12); the wall
  // seconds of the run's earlier attempts that count; when this attempt started.
  std::optional<double> step_seconds;
  double counted_seconds = 0;
  std::optional<double> attempt_started_at;
};

}  // namespace kiln::store
