#include "monitor/tui/theme.h"

#include <curses.h>
#include <langinfo.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "store/run_queries.h"

namespace kiln::tui {
namespace {

// Colour pair numbers, one per coloured tone.
enum Pair : short { kTitle = 1, kGood, kWarn, kBad, kInfo, kAccent, kKeyCap };

}  // namespace

bool colour_wanted(bool mono_flag) {
  const char* no_colour = std::getenv("NO_COLOR");
  return !mono_flag && !(no_colour && *no_colour);
}

Theme::Theme(bool colour)
    : colour_(colour && has_colors()), unicode_(std::strcmp(nl_langinfo(CODESET), "UTF-8") == 0) {
  if (!colour_) return;
  start_color();
  use_default_colors();
  init_pair(kTitle, COLOR_BLACK, COLOR_CYAN);
  init_pair(kGood, COLOR_GREEN, -1);
  init_pair(kWarn, COLOR_YELLOW, -1);
  init_pair(kBad, COLOR_RED, -1);
  init_pair(kInfo, COLOR_CYAN, -1);
  init_pair(kAccent, COLOR_MAGENTA, -1);
  init_pair(kKeyCap, COLOR_BLACK, COLOR_CYAN);
}

int Theme::attr(Tone tone) const {
  if (!colour_) {
    switch (tone) {
      case Tone::Title: case Tone::Selected: case Tone::KeyCap: return A_REVERSE;
      case Tone::Bad: return A_BOLD | A_UNDERLINE;
      case Tone::Warn: case Tone::Accent: return A_BOLD;
      case Tone::Dim: return A_DIM;
      default: return A_NORMAL;
    }
  }
  switch (tone) {
    case Tone::Plain: return A_NORMAL;
    case Tone::Dim: return A_DIM;
    case Tone::Title: return COLOR_PAIR(kTitle) | A_BOLD;
    case Tone::Good: return COLOR_PAIR(kGood);
    case Tone::Warn: return COLOR_PAIR(kWarn) | A_BOLD;
    case Tone::Bad: return COLOR_PAIR(kBad) | A_BOLD;
    case Tone::Info: return COLOR_PAIR(kInfo);
    case Tone::Accent: return COLOR_PAIR(kAccent) | A_BOLD;
    case Tone::Selected: return A_REVERSE;
    case Tone::KeyCap: return COLOR_PAIR(kKeyCap);
  }
  return A_NORMAL;
}

Tone status_tone(store::RunStatus status) {
  using store::RunStatus;
  switch (status) {
    case RunStatus::Running: return Tone::Good;
    case RunStatus::Paused: case RunStatus::Released: return Tone::Warn;
    case RunStatus::Completed: return Tone::Info;
    case RunStatus::Failed: case RunStatus::Lost: return Tone::Bad;
    case RunStatus::Created: case RunStatus::Stopped: return Tone::Dim;
  }
  return Tone::Plain;
}

Tone mfu_tone(double fraction) {
  if (std::isnan(fraction)) return Tone::Dim;
  if (fraction >= 0.4) return Tone::Good;
  return fraction >= 0.2 ? Tone::Warn : Tone::Bad;
}

Tone imbalance_tone(double imbalance) {
  if (std::isnan(imbalance)) return Tone::Dim;
  if (imbalance < 1.5) return Tone::Good;
  return imbalance < 2 ? Tone::Warn : Tone::Bad;
}

Tone age_tone(double seconds) {
  if (std::isnan(seconds)) return Tone::Dim;
  if (seconds < 10) return Tone::Good;
  return seconds < store::kDefaultStaleAfterS ? Tone::Warn : Tone::Bad;
}

}  // namespace kiln::tui
