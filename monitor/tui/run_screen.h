// The run screen: one run live. A header with its config, a progress bar with the ETA, a
// table of every rank's latest step (loss, tokens/s, MFU, memory, step-time split, age of
// its last report; the slowest rank highlighted), plots of loss and tokens/s over the run,
// and the latest events. Steering keys queue commands in the store: p pause/resume,
// c checkpoint, l learning rate, s stop, K kill the processes this UI launched.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "monitor/tui/screen.h"

namespace kiln::tui {

std::unique_ptr<Screen> make_run_screen(int64_t run_id);
// For a run just launched under this name: waits for it to appear in the store, showing
// the launch's log if the process ends first.
std::unique_ptr<Screen> make_launched_run_screen(std::string run_name);

}  // namespace kiln::tui
