// A table that fits the terminal: each column is as wide as its header and its longest cell
// where the row has room. Where it has not, the columns of lowest priority drop out until the
// rest fit at their narrowest, so an 80-column terminal keeps the ones that matter (status,
// name, step, loss), and the room left is shared out evenly among the columns still cut, so
// no one column (a long name) takes it from the others (tags, a device). A growing column
// takes what is left once every column shows its cells whole.
#pragma once

#include <string>
#include <vector>

#include "monitor/tui/theme.h"

namespace kiln::tui {

struct TableColumn {
  std::string header;
  int width = 8;       // the narrowest it is shown at: a longer cell is cut to this before the column drops out
  bool right = false;  // numbers are right-aligned so their digits line up
  int priority = 0;    // higher stays longer
  bool grow = false;   // takes the row's spare width once every cell is whole (a name column)
};

struct TableCell {
  std::string text;
  Tone tone = Tone::Plain;
};

struct FittedColumn {
  size_t index = 0;  // into the columns
  int width = 0;
  bool operator==(const FittedColumn&) const = default;
};

// The columns shown in `width` terminal columns (one space between columns), in order, and
// how wide each is drawn, from the header and the cells of every row (not only those in
// view, so scrolling does not move the columns).
std::vector<FittedColumn> fit_columns(const std::vector<TableColumn>& columns,
                                      const std::vector<std::vector<TableCell>>& rows, int width);

// Draws the header at `row` and then rows[first..] below it, at most `height` lines in all;
// the row `selected` (if in view) in reverse, `marked` rows flagged with a '*' in column 0. A
// cell cut to its column ends in an ellipsis ('~' without UTF-8).
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
