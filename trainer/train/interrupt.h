// Ctrl-C (SIGINT) or SIGTERM during training: the first one asks the loop to stop at the
// next step boundary (so the run ends cleanly); a second one ends the process at once.
#pragma once

namespace kiln {

void install_interrupt_handler();
bool interrupt_requested();

}  // namespace kiln
