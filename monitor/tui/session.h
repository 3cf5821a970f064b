// What every screen shares: the store (a read connection, and a write connection opened on
// the first command), the theme, the processes launched from this UI, and the message line.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "launch/launcher.h"
#include "monitor/tui/theme.h"
#include "store/database.h"

namespace kiln::tui {

// The processes launched from this UI are kept by the one launcher (launch/launcher.h).
using Launcher = launch::Launcher;

// A setting for a live run ("train.lr=3e-4") checked against the run's config as `kiln runs
// set` checks it: returned as the run should read it, or a kiln::Error naming the range. The
// rule is the trainer's, which the monitor may not include, so the CLI hands it in.
using SettingCheck = std::function<std::string(const std::string& assignment, const std::string& run_config_json)>;

class Session {
 public:
  // `reader` is the store, already opened read-only and checked to be a kiln store.
  Session(std::unique_ptr<store::Database> reader, Theme theme, SettingCheck check_setting);

  store::Database& reader() { return *reader_; }
  // Steering and launching write; opened when first needed.
  store::Database& writer();
  const std::string& store_path() const { return reader_->path(); }
  const Theme& theme() const { return theme_; }
  Launcher& launcher() { return launcher_; }
  const SettingCheck& check_setting() const { return check_setting_; }

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
  SettingCheck check_setting_;
  std::string message_;
  Tone message_tone_ = Tone::Info;
  double message_until_ = 0;
};

}  // namespace kiln::tui
