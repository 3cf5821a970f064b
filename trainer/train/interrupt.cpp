#include "trainer/train/interrupt.h"

#include <atomic>
#include <csignal>

namespace kiln {

namespace {
std::atomic<bool> requested{false};

// A second signal of the same kind ends the process at once, as users expect of Ctrl-C.
extern "C" void on_interrupt(int signal) {
  requested.store(true);
  std::signal(signal, SIG_DFL);
}
}  // namespace

void install_interrupt_handler() {
  requested.store(false);
  std::signal(SIGINT, on_interrupt);
  std::signal(SIGTERM, on_interrupt);
}

bool interrupt_requested() { return requested.load(); }

}  // namespace kiln
