#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/serve_command.h"

namespace kiln {

struct TrainOptions {
  std::string config_path;
  std::vector<std::string> overrides;
  bool print_config = false;
  std::string name;
  std::vector<std::string> tags;
  std::string store;
  bool no_store = false;
  std::string resume;
  std::string serve;  // HOST:PORT: serve the dashboard while training
  DashboardOptions dashboard;  // with --serve: --token, --allow-host, --max-connections...
  bool force = false;  // --resume a run that still looks live
  std::string sweep_point;  // SWEEP_ID:POINT, which kiln sweep passes to each run it launches
  std::string layout;       // "auto": the planner's fastest layout for the launched ranks
  std::string plan_device;  // the device --layout auto plans for (default: cpu, or h100 on a GPU)
  std::optional<int> ranks;  // --ranks N: start N ranks under mpirun (cli/rank_launch.h)
  int restart = 0;           // --restart N, which kiln train --max-restarts passes to its Nth restart
  // --max-restarts K, --hostfile F, --exclude-failed: the command stays and supervises its
  // ranks (launch/supervised_run.h).
  std::optional<int> max_restarts;
  std::string hostfile;
  bool exclude_failed = false;
};

// Trains as `kiln train` with these options; command_line is recorded in the store.
void run_train(const TrainOptions& options, const std::string& command_line);

// kiln train [--config FILE] [--set section.key=value ...] [--name NAME] [--tag TAG ...]
//            [--store PATH | --no-store] [--resume CHECKPOINT|latest] [--ranks N] [--print-config]
// command_line is the whole kiln command as typed, which the run store records.
void add_train_command(CLI::App& app, std::string command_line);

// argv as one line a shell would run again: arguments with spaces or quotes are quoted.
std::string shell_command_line(int argc, char** argv);

}  // namespace kiln
