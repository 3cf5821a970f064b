// The runs screen: the store's history as a table (status in colour, name, tags, layout,
// device, step of planned steps, latest loss, tokens/s, MFU, start, duration), sorted by
// any column, filtered by a regex and config KEY=VALUE words, grouped by a tag or a config
// key, runs marked with Space for comparison (marks live in this screen; tags are the
// store's); Enter opens one, n opens the launch form. It orders and groups as the
// dashboard's runs table does (store/run_table.h) and reads only the rows in view.
#pragma once

#include <memory>
#include <string>

#include "monitor/tui/launch_form.h"
#include "monitor/tui/screen.h"

namespace kiln::tui {

std::unique_ptr<Screen> make_runs_screen(LaunchSetup launch);

}  // namespace kiln::tui
