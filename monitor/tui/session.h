// What every screen shares: the store (a read connection, and a write connection opened on
// the first command), the theme, the processes launched from this UI, and the message line.
#pragma once

#include <memory>
#include <string>

#include "monitor/tui/launcher.h"
#include "monitor/tui/theme.h"
#include "store/database.h"

namespace kiln::tui {

class Session {
 public:
  // `reader` is the store, already opened read-only and checked to be a kiln store.
  Session(std::unique_ptr<store::Database> reader, Theme theme);

  store::Database& reader() { return *reader_; }
  // Steering and launching write; opened when first needed.
  store::Database& writer();
  const std::string& store_path() const { return reader_->path(); }
  const Theme& theme() const { return theme_; }
  Launcher& launcher() { return launcher_; }

  // A message for the bottom row, shown for a few seconds.
  void flash(std::string message, Tone tone = Tone::Info);
  // The message while it is fresh, else empty.
  const std::string& message(double now) const;
  Tone message_tone() const { return message_tone_; }

 private:
  std::unique_ptr<store::Database> reader_;
  std::unique_ptr<store::Database> writer_;
  Theme theme_;
  Launcher launcher_;
  std::string message_;
  Tone message_tone_ = Tone::Info;
  double message_until_ = 0;
};

}  // namespace kiln::tui
