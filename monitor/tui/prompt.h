// A one-line question on the bottom row: text entry (a regex, a learning rate, a field of
// the launch form) or a yes/no confirmation. While open it takes every key.
#pragma once

#include <string>

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
  void draw(int row, const Theme& theme) const;

 private:
  Kind kind_;
  std::string question_;
  std::string text_;
};

// Applies the line-editing keys to `text` (printable characters, Backspace, Ctrl-U);
// false when the key is not one of them.
bool edit_line(std::string& text, int key);

}  // namespace kiln::tui
