#include "monitor/tui/prompt.h"

#include <curses.h>

#include "monitor/tui/draw.h"

namespace kiln::tui {
namespace {

constexpr int kEscape = 27;
constexpr int kCtrlU = 21;

bool is_enter(int key) { return key == '\n' || key == '\r' || key == KEY_ENTER; }

}  // namespace

bool edit_line(std::string& text, int key) {
  if (key == KEY_BACKSPACE || key == 127 || key == 8) {
    // Drops the last code point, continuation bytes and all.
    while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();
    if (!text.empty()) text.pop_back();
    return true;
  }
  if (key == kCtrlU) {
    text.clear();
    return true;
  }
  if (key >= 32 && key < 127) {
    text += static_cast<char>(key);
    return true;
  }
  return false;
}

Prompt::Prompt(Kind kind, std::string question, std::string initial)
    : kind_(kind), question_(std::move(question)), text_(std::move(initial)) {}

Prompt::Result Prompt::key(int key) {
  if (key == kEscape) return Result::Cancelled;
  if (kind_ == Kind::Confirm) {
    if (key == 'y' || key == 'Y') return Result::Accepted;
    if (key == 'n' || key == 'N') return Result::Cancelled;
    return Result::Open;
  }
  if (is_enter(key)) return Result::Accepted;
  edit_line(text_, key);
  return Result::Open;
}

void Prompt::draw(int row, const Theme& theme) const {
  fill_row(row, 0, COLS, 0);
  const std::string suffix = kind_ == Kind::Confirm ? " (y/n)" : "";
  int col = put(row, 0, question_ + suffix + " ", COLS, theme.attr(Tone::Warn));
  col += put(row, col, text_, COLS - col, 0);
  if (kind_ == Kind::Text) put(row, col, "_", 1, A_BLINK);
}

}  // namespace kiln::tui
