// kiln tui: the terminal dashboard over a run store (docs/tui.md).
#pragma once

#include <memory>
#include <string>

#include "monitor/tui/launch_form.h"
#include "store/database.h"

namespace kiln::tui {

struct AppOptions {
  bool mono = false;  // --mono: no colours (so does NO_COLOR)
  LaunchSetup launch;
  SettingCheck check_setting;
};

// Runs the UI on a store already opened read-only until the user quits.
void run_app(std::unique_ptr<store::Database> store, const AppOptions& options);

}  // namespace kiln::tui
