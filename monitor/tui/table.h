// A table that fits the terminal: each column has a width and a priority, and the columns
// of lowest priority drop out until the rest fit, so an 80-column terminal keeps the ones
// that matter (status, name, step, loss) and a wide one shows everything; a growing column
// takes what is left of the row.
#pragma once

#include <string>
#include <vector>

#include "monitor/tui/theme.h"

namespace kiln::tui {

struct TableColumn {
  std::string header;
  int width = 8;
  bool right = false;  // numbers are right-aligned so their digits line up
  int priority = 0;    // higher stays longer
  bool grow = false;   // takes the row's spare width (a name column)
};

struct TableCell {
  std::string text;
  Tone tone = Tone::Plain;
};

// Indices of the columns that fit in `width` (one space between columns), in order.
std::vector<size_t> fit_columns(const std::vector<TableColumn>& columns, int width);

// Draws the header at `row` and then rows[first..] below it, at most `height` lines in all;
// the row `selected` (if in view) in reverse, `marked` rows flagged with a '*' in column 0.
struct TableView {
  int row = 0, col = 0, width = 0, height = 0;
  size_t first = 0;
  long selected = -1;
  bool focused = true;
};
void draw_table(const TableView& view, const std::vector<TableColumn>& columns,
                const std::vector<std::vector<TableCell>>& rows, const std::vector<bool>& marked,
                const Theme& theme);

// The first row to show so that `selected` stays in a window of `visible` rows.
size_t scroll_to_show(size_t first, size_t selected, size_t visible);

}  // namespace kiln::tui

namespace kiln::tui {

// Moves a selection in a list of `count` rows with the list keys (Up/Down, j/k, PgUp/PgDn,
// Home/End, g/G); `page` rows per page. False when the key is not one of them.
bool move_selection(int key, size_t count, size_t page, size_t& selected);

}  // namespace kiln::tui
