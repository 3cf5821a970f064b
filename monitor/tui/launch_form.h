// The launch form: a config from configs/ (Left/Right) or any path typed in, the run's name,
// and overrides (steps, learning rate, tp/pp/dp, device, more --set key=value pairs); Enter
// starts `kiln train` in the background (`--ranks tp*pp*dp` when that is above 1: it starts
// its ranks under mpirun itself)
// with its output in <checkpoint_dir>/<name>/train.log, and the run screen takes over.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "launch/train_command.h"
#include "monitor/tui/screen.h"

namespace kiln::tui {

// What the form needs from the kiln binary it runs in.
struct LaunchSetup {
  std::string configs_dir;  // where the form lists configs
  std::string kiln_binary;  // the kiln it starts
  // The name `kiln train` gives a run from its config's path when no --name is given. The
  // trainer owns that rule and the monitor may not include the trainer, so the CLI hands it
  // in; the form proposes it, so a run launched here is named as one started by hand.
  std::function<std::string(const std::string& config_path)> default_run_name;
};

std::unique_ptr<Screen> make_launch_form(LaunchSetup setup);

// The values of the form, as typed.
struct LaunchValues {
  std::string config, name, steps, lr, tp = "1", pp = "1", dp = "1", device = "auto", more;
};

// What a launch runs: the command, detached, and where its output goes. Bad values are a
// kiln::Error naming the field (the name as the store checks it).
struct LaunchPlan {
  launch::TrainCommand command;
  int processes = 1;
};
LaunchPlan plan_launch(const LaunchValues& values, const std::string& kiln_binary,
                       const std::string& store_path);

}  // namespace kiln::tui
