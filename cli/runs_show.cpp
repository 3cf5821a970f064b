// kiln runs show: one run's record, config, latest metrics (and, for a mixture-of-experts
// model, the latest routing in one line), events, checkpoints, rewinds past loss spikes, commands.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/runs_command.h"
#include "cli/runs_format.h"
#include "cli/runs_store.h"
#include "base/check.h"
#include "base/terminal_text.h"
#include "monitor/format/config_text.h"
#include "monitor/format/expert_text.h"
#include "monitor/format/figures.h"
#include "monitor/server/spread_json.h"
#include "store/json_rows.h"
#include "store/run_details.h"
#include "store/run_figures.h"
#include "store/run_queries.h"

namespace kiln {
namespace {


struct ShowOptions {
  std::string store;
  std::string run;
  int events = 20;
  bool json = false;
};

// "label:" padded so the values line up; the value as a terminal may show it.
void field(std::string_view label, const std::string& value) {
  if (!value.empty()) fmt::print("  {:<11}{}\n", std::string(label) + ":", terminal_line(value));
}

std::string status_text(const store::RunRecord& run) {
  std::string text(store::to_string(run.status));
  if (run.status == store::RunStatus::Lost)
    text += fmt::format(" (recorded as {}; no heartbeat since {})",
                        store::to_string(run.stored_status),
                        local_second(run.heartbeat_at.value_or(run.created_at)));
  return text;
}

std::string machine_text(const store::RunRecord& run) {
  std::string text = run.backend;
  if (!run.device.empty()) text += (text.empty() ? "" : " ") + ("(" + run.device + ")");
  if (!run.host.empty()) text += (text.empty() ? "on " : " on ") + run.host;
  if (!run.layout.empty()) text += (text.empty() ? "layout " : ", layout ") + run.layout;
  return text;
}

std::string times_text(const store::RunRecord& run, double now) {
  std::string text = "created " + local_second(run.created_at);
  if (run.started_at) text += ", started " + local_second(*run.started_at);
  if (run.ended_at) text += ", ended " + local_second(*run.ended_at);
  const double duration = store::run_duration_s(run, now);
  if (!std::isnan(duration))
    text += (run.ended_at || run.status == store::RunStatus::Lost ? ", ran " : ", running for ") +
            duration_or_absent(duration);
  return text;
}

// "91.2%: 1h02m of steps that count in 1h08m", "" when the run has no goodput.
std::string goodput_text(const store::RunRecord& run, double now) {
  const std::optional<double> goodput = store::goodput(run, now);
  if (!goodput) return "";
  return fmt::format("{:.1f}%: {} of steps that count in {}", *goodput * 100, duration_or_absent(*run.step_seconds),
                     duration_or_absent(*run.step_seconds / *goodput));
}

// "baseline (run 3) at step 4000", for the parents and forks lines.
std::string links_text(const std::vector<store::LineageLink>& links) {
  std::vector<std::string> texts;
  for (const store::LineageLink& l : links)
    texts.push_back(fmt::format("{} (run {}, {}) at step {}", l.name, l.id, store::to_string(l.status), l.step));
  return join(texts, ", ");
}

void print_record(const store::RunRecord& run, const store::Lineage& lineage, double now) {
  fmt::print("run {}: {}\n", run.id, terminal_line(run.name));
  field("status", status_text(run));
  field("error", run.error);
  field("machine", machine_text(run));
  field("command", run.command_line);
  if (!lineage.ancestors.empty()) field("parent", links_text({lineage.ancestors.front()}));
  field("forks", links_text(lineage.forks));
  field("times", times_text(run, now));
  field("goodput", goodput_text(run, now));
  field("tags", join(run.tags, ", "));
  field("notes", run.notes);
  field("config", config_summary(run.config_json));
}

void print_latest(const store::RunDetails& d) {
  if (d.latest.empty()) {
    fmt::print("\nno metrics logged yet\n");
  } else {
    using A = Table::Align;
    fmt::print("\nlatest metrics (step {}):\n", d.latest.front().step);
    Table table({{"RANK", A::Right},
                 {"LOSS", A::Right},
                 {"LR", A::Right},
                 {"GRAD NORM", A::Right},
                 {"TOK/S", A::Right},
                 {"TFLOP/S", A::Right},
                 {"MFU", A::Right},
                 {"MEM", A::Right},
                 {"PEAK MEM", A::Right}});
    for (const auto& m : d.latest) {
      // Three significant digits keep the column: 0.000285714 rather than every digit of a double.
      table.add({std::to_string(m.rank), fixed4(m.loss), std::isnan(m.lr) ? kAbsent : fmt::format("{:.3g}", m.lr),
                 fixed4(m.grad_norm),
                 compact_rate(m.tokens_per_s),
                 std::isnan(m.tflops) ? kAbsent : fmt::format("{:.1f}", m.tflops), percent(m.mfu),
                 bytes_or_absent(m.mem_used), bytes_or_absent(m.mem_peak)});
    }
    table.print(stdout, 2);
    if (d.latest_ranks > static_cast<int64_t>(d.latest.size()))
      fmt::print("  rank 0 of the {} ranks that logged the step; every rank's: the dashboard's Ranks panel or kiln tui\n",
                 d.latest_ranks);
  }
  if (d.latest_valid)
    fmt::print("latest validation loss: {} at step {}\n", fixed4(d.latest_valid->loss),
               d.latest_valid->step);
  if (!d.latest_experts.empty()) fmt::print("experts: {}\n", experts_summary(d.latest_experts));
}

// The texts the model wrote at its latest validation step, one per prompt, each line indented
// under its heading.
void print_latest_samples(const std::vector<store::Sample>& samples) {
  for (const store::Sample& sample : samples) {
    fmt::print("\nlatest sample{} (step {}, temperature {:g}):\n",
               samples.size() > 1 ? fmt::format(" {} of {}", sample.slot + 1, samples.size()) : "", sample.step,
               sample.temperature);
    const std::string text = terminal_block(sample.prompt + sample.text);
    for (size_t start = 0; start <= text.size();) {
      const size_t end = std::min(text.find('\n', start), text.size());
      fmt::print("  {}\n", std::string_view(text).substr(start, end - start));
      start = end + 1;
    }
  }
}

void print_events(const std::vector<store::Event>& events) {
  if (events.empty()) return;
  fmt::print("\nevents (latest {}):\n", events.size());
  Table table({{"TIME"}, {"STEP", Table::Align::Right}, {"KIND"}, {"MESSAGE"}});
  for (const auto& e : events)
    table.add({local_second(e.time), e.step ? std::to_string(*e.step) : kAbsent, e.kind,
               e.message});
  table.print(stdout, 2);
}

void print_checkpoints(const std::vector<store::Checkpoint>& checkpoints) {
  if (checkpoints.empty()) return;
  fmt::print("\ncheckpoints:\n");
  Table table({{"STEP", Table::Align::Right},
               {"SIZE", Table::Align::Right},
               {"LAYOUT"},
               {"TIME"},
               {"PATH"}});
  for (const auto& c : checkpoints)
    table.add({std::to_string(c.step), bytes_or_absent(c.bytes),
               c.layout.empty() ? kAbsent : c.layout, local_second(c.time), c.path});
  table.print(stdout, 2);
}

// Each rewind past a loss spike: where from and to, the data it skipped, the losses it left.
void print_rewinds(const std::vector<store::Rewind>& rewinds) {
  if (rewinds.empty()) return;
  fmt::print("\nrewinds:\n");
  using A = Table::Align;
  Table table({{"#", A::Right}, {"TIME"}, {"SPIKE", A::Right}, {"FROM", A::Right}, {"TO", A::Right},
               {"SKIPPED BATCHES"}, {"ABANDONED LOSSES", A::Right}, {"CHECKPOINT"}});
  for (const auto& r : rewinds) {
    std::string skipped = kAbsent;
    if (r.skipped_batches > 0)
      skipped = fmt::format("{}-{}", r.first_skipped_batch, r.first_skipped_batch + r.skipped_batches - 1);
    table.add({std::to_string(r.number), local_second(r.time), std::to_string(r.spike_step),
               std::to_string(r.from_step), std::to_string(r.to_step), skipped, std::to_string(r.losses.size()),
               r.checkpoint});
  }
  table.print(stdout, 2);
}

void print_commands(const std::vector<store::Command>& commands) {
  if (commands.empty()) return;
  fmt::print("\ncommands:\n");
  using A = Table::Align;
  Table table({{"ID", A::Right}, {"QUEUED"}, {"ACTION"}, {"STATUS"}, {"STEP", A::Right},
               {"REASON"}});
  for (const auto& c : commands) {
    std::string action(store::to_string(c.action));
    if (!c.argument.empty()) action += " " + c.argument;
    table.add({std::to_string(c.id), local_second(c.created_at), action,
               std::string(store::to_string(c.status)),
               c.applied_step ? std::to_string(*c.applied_step) : kAbsent,
               c.reason.empty() ? kAbsent : c.reason});
  }
  table.print(stdout, 2);
}

void runs_show(const ShowOptions& options) {
  if (options.events < 0) fail(fmt::format("--events must be 0 or more, got {}", options.events));
  const auto db = open_store_for_reading(options.store);
  const int64_t id = store::resolve_run(*db, options.run);
  const store::RunDetails d =
      store::run_details(*db, id, static_cast<size_t>(options.events));
  if (options.json) {
    fmt::print("{}\n", store::dump_json(monitor::details_json(*db, d), 2));
    return;
  }
  print_record(d.run, d.lineage, store::unix_now());
  print_latest(d);
  print_latest_samples(d.latest_samples);
  print_events(d.events);
  print_checkpoints(d.checkpoints);
  print_rewinds(d.rewinds);
  print_commands(d.commands);
}

}  // namespace

void add_runs_show_command(CLI::App& runs) {
  auto options = std::make_shared<ShowOptions>();
  CLI::App* cmd = runs.add_subcommand(
      "show", "Show one run: record, config, latest metrics, events, checkpoints, commands");
  cmd->add_option("run", options->run, "Run id, name, or unambiguous name prefix")->required();
  add_store_option(cmd, options->store);
  cmd->add_option("--events", options->events, "How many of the latest events to show")
      ->capture_default_str();
  cmd->add_flag("--json", options->json, "Print JSON, with the full config");
  cmd->callback([options] { runs_show(*options); });
}

}  // namespace kiln
