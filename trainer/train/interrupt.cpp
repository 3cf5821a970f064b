#include "trainer/train/interrupt.h"

#include <atomic>
#include <csignal>

namespace kiln {

namespace {
std::atomic<bool> requested{false};

extern "C" void on_interrupt(int) {
  requested.store(true);
  std::signal(SIGINT, SIG_DFL);
}
}  // namespace

void install_interrupt_handler() {
  requested.store(false);
  std::signal(SIGINT, on_interrupt);
}

bool interrupt_requested() { return requested.load(); }

}  // namespace kiln
