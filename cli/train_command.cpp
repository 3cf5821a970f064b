#include "cli/train_command.h"

#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "cli/store_path.h"
#include "trainer/config/config.h"
#include "trainer/train/trainer.h"

namespace kiln {

namespace {

struct TrainOptions {
  std::string config_path;
  std::vector<std::string> overrides;
  bool print_config = false;
  std::string name;
  std::vector<std::string> tags;
  std::string store;
  bool no_store = false;
};

void run_train(const TrainOptions& options, const std::string& command_line) {
  const Config config = load_config(options.config_path, options.overrides);
  if (options.print_config) {
    fmt::print("{}\n", config_to_json(config).dump(2));
    return;
  }
  RecordOptions record;
  if (!options.no_store) {
    record.store_path = resolve_store_path(options.store, config.store.path);
    record.name = options.name.empty() ? default_run_name(options.config_path) : options.name;
    record.name_given = !options.name.empty();
    record.command_line = command_line;
    record.tags = options.tags;
  }
  Trainer trainer(config, record);
  const TrainSummary summary = trainer.run();
  if (summary.interrupted) throw CLI::RuntimeError(130);
}

bool needs_quotes(const std::string& arg) {
  return arg.empty() || arg.find_first_of(" \t\n'\"\\$`*?[]{}()<>|&;#~") != std::string::npos;
}

}  // namespace

std::string shell_command_line(int argc, char** argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (needs_quotes(arg)) {
      std::string quoted = "'";
      for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
      arg = quoted + "'";
    }
    line += (i ? " " : "") + arg;
  }
  return line;
}

void add_train_command(CLI::App& app, std::string command_line) {
  auto options = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand(
      "train", "Train a model (the tiny demo config when no --config is given)");
  cmd->add_option("-c,--config", options->config_path, "JSON run config")
      ->check(CLI::ExistingFile);
  cmd->add_option("--set", options->overrides,
                  "Override a config key: section.key=value (value parsed as JSON, else a string)")
      ->take_all()
      ->allow_extra_args(false);
  cmd->add_option("--name", options->name,
                  "Name of the run in the store (default: the config's file name and the time)");
  cmd->add_option("--tag", options->tags, "Tag the run (repeat for several)")
      ->allow_extra_args(false);
  CLI::Option* store = cmd->add_option(
      "--store", options->store,
      "Run store file (default: $KILN_STORE, else store.path, else ./kiln-runs.db)");
  cmd->add_flag("--no-store", options->no_store, "Do not record the run in a store")
      ->excludes(store);
  cmd->add_flag("--print-config", options->print_config,
                "Print the resolved config as JSON and exit");
  cmd->callback([options, command_line] { run_train(*options, command_line); });
}

}  // namespace kiln
