// Writing text to the screen: clipped to a width counted in terminal columns (our glyphs,
// braille and block characters included, are one column each), padded, aligned.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln::tui {

// Terminal columns of UTF-8 text: its code points.
int text_width(std::string_view text);
// The text cut to at most `width` columns.
std::string clip(std::string_view text, int width);
// The text cut or padded to exactly `width` columns, left or right aligned.
std::string pad_left_aligned(std::string_view text, int width);
std::string pad_right_aligned(std::string_view text, int width);
// The text in lines of at most `width` columns, broken at spaces (a word longer than a line
// is cut across lines); no line starts or ends with the space it broke at.
std::vector<std::string> wrap(std::string_view text, int width);

// Writes text at (row, col) with a curses attribute, cut at `width` columns and at the
// screen's right edge, its control characters shown as escapes (base/terminal_text.h).
// Returns the columns written.
int put(int row, int col, std::string_view text, int width, int attr = 0);
// Fills a row from col with spaces in an attribute (title bars, selected rows).
void fill_row(int row, int col, int width, int attr);

}  // namespace kiln::tui
