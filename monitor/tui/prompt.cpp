#include "monitor/tui/prompt.h"

#include <curses.h>

#include <algorithm>

#include "monitor/tui/draw.h"
#include "monitor/tui/terminal.h"

namespace kiln::tui {
namespace {

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
  if (key == kEscapeKey) return Result::Cancelled;
  if (kind_ == Kind::Confirm) {
    if (key == 'y' || key == 'Y') return Result::Accepted;
    if (key == 'n' || key == 'N') return Result::Cancelled;
    return Result::Open;
  }
  if (is_enter(key)) return Result::Accepted;
  edit_line(text_, key);
  return Result::Open;
}

std::vector<std::string> Prompt::question_lines(int width) const {
  std::vector<std::string> lines = wrap(question_ + (kind_ == Kind::Confirm ? " (y/n)" : ""), width);
  if (lines.empty()) lines.emplace_back();
  return lines;
}

bool Prompt::text_fits_after(const std::string& line, int width) const {
  return text_width(line) + 1 + text_width(text_) + 1 <= width;
}

int Prompt::rows(int width) const {
  const std::vector<std::string> lines = question_lines(width);
  const bool own_row = kind_ == Kind::Text && !text_fits_after(lines.back(), width);
  return static_cast<int>(lines.size()) + (own_row ? 1 : 0);
}

void Prompt::draw(int row, const Theme& theme) const {
  const std::vector<std::string> lines = question_lines(COLS);
  for (size_t i = 0; i < lines.size(); ++i) {
    fill_row(row + static_cast<int>(i), 0, COLS, 0);
    put(row + static_cast<int>(i), 0, lines[i], COLS, theme.attr(Tone::Warn));
  }
  if (kind_ != Kind::Text) return;
  int y = row + static_cast<int>(lines.size()) - 1;
  int col = text_width(lines.back()) + 1;
  if (!text_fits_after(lines.back(), COLS)) {
    fill_row(++y, 0, COLS, 0);
    col = 0;
  }
  // Text longer than the row shows its end, where the typing happens (it is ASCII: the line
  // editor takes printable ASCII only).
  const int room = std::max(0, COLS - col - 1);
  const int over = text_width(text_) - room;
  col += put(y, col, over > 0 ? text_.substr(static_cast<size_t>(over)) : text_, room, 0);
  put(y, col, "_", 1, A_BLINK);
}

}  // namespace kiln::tui
