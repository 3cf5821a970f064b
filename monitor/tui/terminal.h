// The terminal in curses mode for as long as this object lives: keys unbuffered and not
// echoed, the cursor hidden, getch waiting at most a tick. The destructor restores the
// terminal, also when an error unwinds through it; Ctrl-C (SIGINT) and SIGTERM only set a
// flag the UI loop reads, so the restore always runs.
#pragma once

namespace kiln::tui {

// What getch returns for the Esc key (curses has no KEY_ name for it).
inline constexpr int kEscapeKey = 27;

class Terminal {
 public:
  // tick_ms: the longest getch waits for a key. A terminal that cannot be opened (not a
  // terminal, unknown TERM) is a kiln::Error.
  explicit Terminal(int tick_ms);
  ~Terminal();
  Terminal(const Terminal&) = delete;
  Terminal& operator=(const Terminal&) = delete;

  // Ctrl-C or SIGTERM arrived.
  static bool interrupted();
};

}  // namespace kiln::tui
