#include "monitor/tui/terminal.h"

#include <curses.h>
#include <unistd.h>

#include <atomic>
#include <clocale>
#include <csignal>
#include <cstdlib>
#include <string>

#include "base/check.h"

namespace kiln::tui {
namespace {

std::atomic<bool> interrupt_flag{false};

void on_signal(int) { interrupt_flag = true; }

constexpr int kEscapeDelayMs = 25;  // Esc alone reads at once, not after curses' 1 s default

SCREEN* screen = nullptr;

}  // namespace

Terminal::Terminal(int tick_ms) {
  if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
    fail("tui: needs a terminal (stdin and stdout); for scripts use `kiln runs list|show`");
  // Braille and block glyphs need the user's UTF-8 locale.
  std::setlocale(LC_ALL, "");
  screen = newterm(nullptr, stdout, stdin);
  if (!screen) {
    const char* term = std::getenv("TERM");
    fail(std::string("tui: cannot drive the terminal type '") + (term ? term : "") +
         "' (set TERM, e.g. TERM=xterm-256color)");
  }
  set_term(screen);
  cbreak();
  noecho();
  keypad(stdscr, TRUE);
  curs_set(0);
  set_escdelay(kEscapeDelayMs);
  timeout(tick_ms);
  interrupt_flag = false;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

Terminal::~Terminal() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  endwin();
  delscreen(screen);
  screen = nullptr;
}

bool Terminal::interrupted() { return interrupt_flag; }

}  // namespace kiln::tui
