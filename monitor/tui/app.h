// kiln tui: the terminal dashboard over a run store (docs/tui.md).
#pragma once

#include <memory>
#include <string>

#include "store/database.h"

namespace kiln::tui {

struct AppOptions {
  bool mono = false;         // --mono: no colours (so does NO_COLOR)
  std::string configs_dir;   // where the launch form lists configs
  std::string kiln_binary;   // the kiln the launch form starts
};

// Runs the UI on a store already opened read-only until the user quits.
void run_app(std::unique_ptr<store::Database> store, const AppOptions& options);

}  // namespace kiln::tui
