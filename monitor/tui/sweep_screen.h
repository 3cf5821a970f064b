// The sweep screen: a sweep's state and command line, its points as a table (each swept
// parameter, the run, its status, step, final and best loss and validation loss, tokens/s)
// with the best point marked '*', and a scatter of the points' loss against one parameter
// (p picks the next). s sorts by loss or back by point; Enter opens the selected point's run.
// The runs screen opens it with S on a run a sweep launched.
#pragma once

#include <cstdint>
#include <memory>

#include "monitor/tui/screen.h"

namespace kiln::tui {

std::unique_ptr<Screen> make_sweep_screen(int64_t sweep_id);

}  // namespace kiln::tui
