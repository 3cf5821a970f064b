#include "cli/train_command.h"

#include <memory>
#include <string>
#include <vector>

#include <fmt/core.h>

#include "trainer/config/config.h"
#include "trainer/train/trainer.h"

namespace kiln {

namespace {

struct TrainOptions {
  std::string config_path;
  std::vector<std::string> overrides;
  bool print_config = false;
};

void run_train(const TrainOptions& options) {
  const Config config = load_config(options.config_path, options.overrides);
  if (options.print_config) {
    fmt::print("{}\n", config_to_json(config).dump(2));
    return;
  }
  Trainer trainer(config);
  const TrainSummary summary = trainer.run();
  if (summary.interrupted) throw CLI::RuntimeError(130);
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto options = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand(
      "train", "Train a model (the tiny demo config when no --config is given)");
  cmd->add_option("-c,--config", options->config_path, "JSON run config")
      ->check(CLI::ExistingFile);
  cmd->add_option("--set", options->overrides,
                  "Override a config key: section.key=value (value parsed as JSON, else a string)")
      ->take_all()
      ->allow_extra_args(false);
  cmd->add_flag("--print-config", options->print_config,
                "Print the resolved config as JSON and exit");
  cmd->callback([options] { run_train(*options); });
}

}  // namespace kiln
