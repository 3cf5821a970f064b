#include "monitor/tui/draw.h"

#include <curses.h>

#include <algorithm>

#include "base/terminal_text.h"

namespace kiln::tui {
namespace {

bool continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

int text_width(std::string_view text) {
  return static_cast<int>(std::count_if(text.begin(), text.end(),
                                        [](char c) { return !continuation_byte(c); }));
}

std::string clip(std::string_view text, int width) {
  int columns = 0;
  size_t end = 0;
  while (end < text.size()) {
    if (!continuation_byte(text[end])) {
      if (columns == width) break;
      ++columns;
    }
    ++end;
  }
  return std::string(text.substr(0, end));
}

std::string pad_left_aligned(std::string_view text, int width) {
  std::string out = clip(text, width);
  out.append(static_cast<size_t>(std::max(0, width - text_width(out))), ' ');
  return out;
}

std::string pad_right_aligned(std::string_view text, int width) {
  const std::string cut = clip(text, width);
  return std::string(static_cast<size_t>(std::max(0, width - text_width(cut))), ' ') + cut;
}

std::vector<std::string> wrap(std::string_view text, int width) {
  std::vector<std::string> lines;
  if (width < 1) return lines;
  std::string line;
  size_t at = 0;
  while (at < text.size()) {
    if (text[at] == ' ') {
      ++at;
      continue;
    }
    const size_t end = std::min(text.find(' ', at), text.size());
    std::string_view word = text.substr(at, end - at);
    at = end;
    if (!line.empty() && text_width(line) + 1 + text_width(word) <= width) {
      line += ' ';
      line += word;
      continue;
    }
    if (!line.empty()) lines.push_back(std::move(line));
    line.clear();
    while (text_width(word) > width) {
      const std::string head = clip(word, width);
      lines.push_back(head);
      word.remove_prefix(head.size());
    }
    line = word;
  }
  if (!line.empty()) lines.push_back(std::move(line));
  return lines;
}

int put(int row, int col, std::string_view text, int width, int attr) {
  const int room = std::min(width, COLS - col);
  if (row < 0 || row >= LINES || col < 0 || room <= 0) return 0;
  // Names, tags, notes and samples come from users and models: their control characters are
  // shown as escapes, never passed to the terminal.
  const std::string cut = clip(terminal_line(text), room);
  attron(attr);
  mvaddstr(row, col, cut.c_str());
  attroff(attr);
  return text_width(cut);
}

void fill_row(int row, int col, int width, int attr) {
  const int room = std::min(width, COLS - col);
  if (room <= 0) return;
  put(row, col, std::string(static_cast<size_t>(room), ' '), room, attr);
}

}  // namespace kiln::tui
