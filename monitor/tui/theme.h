// Colours and attributes of the terminal UI, by meaning rather than by colour, so a screen
// says "bad" and the theme decides whether that is red or (in monochrome) bold.
#pragma once

#include "store/types.h"

namespace kiln::tui {

enum class Tone { Plain, Dim, Title, Good, Warn, Bad, Info, Accent, Selected, KeyCap };

// Monochrome when asked (--mono), when NO_COLOR is set to anything non-empty (no-color.org),
// or when the terminal has no colours.
bool colour_wanted(bool mono_flag);

class Theme {
 public:
  // Starts ncurses' colours when `colour`; call after the screen is initialised.
  explicit Theme(bool colour);

  // The curses attribute (colour pair and/or bold, reverse, dim) of a tone.
  int attr(Tone tone) const;
  bool colour() const { return colour_; }
  // Braille and box glyphs need a UTF-8 locale; without one the plots draw in ASCII.
  bool unicode() const { return unicode_; }

 private:
  bool colour_;
  bool unicode_;
};

// Running green, paused yellow, completed blue, failed and lost red, the rest dim.
Tone status_tone(store::RunStatus status);
// A fraction (MFU) by threshold: at least 40% good, at least 20% fair, below that poor.
Tone mfu_tone(double fraction);
// Seconds since a rank last reported: fresh, late (10 s), or stale (30 s, the store's
// threshold for reading a run as lost).
Tone age_tone(double seconds);
// A MoE layer's imbalance (max / mean tokens per expert): below 1.5 good, below 2 fair, from
// 2 (one expert takes twice its share) poor.
Tone imbalance_tone(double imbalance);

}  // namespace kiln::tui
