// kiln tui: launch, watch and steer runs and browse their history in the terminal.
#include "cli/tui_command.h"

#include <filesystem>
#include <memory>
#include <string>

#include "cli/runs_store.h"
#include "monitor/tui/app.h"
#include "trainer/steer/setting.h"
#include "trainer/train/run_recorder.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

struct TuiOptions {
  std::string store;
  bool mono = false;
};

// The configs the launch form offers: ./configs when there is one, else the configs/ of
// the source tree this binary was built in (build/kiln -> configs/).
std::string configs_dir(const fs::path& binary) {
  if (fs::is_directory("configs")) return "configs";
  return (binary.parent_path().parent_path() / "configs").string();
}

void run_tui(const TuiOptions& options) {
  // The store is opened, and checked to be a kiln store, before the screen changes: a bad
  // path is one line on a normal terminal.
  auto db = open_store_for_reading(options.store);
  // The launch form starts this very binary, wherever it was run from.
  const fs::path binary = fs::read_symlink("/proc/self/exe");
  tui::AppOptions app;
  app.mono = options.mono;
  app.launch.kiln_binary = binary.string();
  app.launch.configs_dir = configs_dir(binary);
  app.launch.default_run_name = default_run_name;
  app.check_setting = [](const std::string& assignment, const std::string& run_config_json) {
    return checked_setting(assignment, run_config_json, false, "kiln runs set --force sets it anyway");
  };
  tui::run_app(std::move(db), app);
}

}  // namespace

void add_tui_command(CLI::App& app) {
  auto options = std::make_shared<TuiOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tui", "Terminal dashboard: launch, watch and steer runs, browse and compare history");
  add_store_option(cmd, options->store);
  cmd->add_flag("--mono", options->mono, "No colours (also when NO_COLOR is set)");
  cmd->callback([options] { run_tui(*options); });
}

}  // namespace kiln
