#include "monitor/tui/session.h"

#include "store/schema.h"
#include "store/types.h"

namespace kiln::tui {
namespace {

constexpr double kMessageSeconds = 5;

}  // namespace

Session::Session(std::unique_ptr<store::Database> reader, Theme theme, SettingCheck check_setting)
    : reader_(std::move(reader)), theme_(theme), check_setting_(std::move(check_setting)) {}

store::Database& Session::writer() {
  if (!writer_) writer_ = store::open_store(reader_->path(), store::Access::ReadWrite);
  return *writer_;
}

void Session::flash(std::string message, Tone tone) {
  message_ = std::move(message);
  message_tone_ = tone;
  message_until_ = store::unix_now() + kMessageSeconds;
}

const std::string& Session::message(double now) const {
  static const std::string none;
  return now < message_until_ ? message_ : none;
}

}  // namespace kiln::tui
