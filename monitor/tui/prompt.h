// A question at the bottom of the screen: text entry (a regex, a learning rate) or a yes/no
// confirmation. A long question wraps over more rows. While open it takes every key.
#pragma once

#include <string>
#include <vector>

#include "monitor/tui/theme.h"

namespace kiln::tui {

class Prompt {
 public:
  enum class Kind { Text, Confirm };
  enum class Result { Open, Accepted, Cancelled };

  Prompt(Kind kind, std::string question, std::string initial = {});

  // Enter accepts, Esc cancels; a Confirm accepts on y and cancels on n as well.
  // Text editing: printable characters, Backspace, Ctrl-U clears the line.
  Result key(int key);
  const std::string& text() const { return text_; }
  // The rows it takes at `width` columns: the question wrapped, the typed text after it
  // (on a row of its own when the question's last row has no room for it).
  int rows(int width) const;
  // Draws from `row` down, rows(COLS) rows.
  void draw(int row, const Theme& theme) const;

 private:
  std::vector<std::string> question_lines(int width) const;
  bool text_fits_after(const std::string& line, int width) const;

  Kind kind_;
  std::string question_;
  std::string text_;
};

// Applies the line-editing keys to `text` (printable characters, Backspace, Ctrl-U);
// false when the key is not one of them.
bool edit_line(std::string& text, int key);

}  // namespace kiln::tui
