#include "monitor/tui/table.h"

#include <curses.h>

#include <algorithm>
#include <numeric>

#include "monitor/tui/draw.h"

namespace kiln::tui {
namespace {

constexpr int kMarkWidth = 2;  // "* " before a marked row

int used_width(const std::vector<TableColumn>& columns, const std::vector<size_t>& shown) {
  int width = 0;
  for (size_t i : shown) width += columns[i].width + 1;
  return width;
}

std::string cell_text(const TableColumn& column, const std::string& text, int width) {
  return column.right ? pad_right_aligned(text, width) : pad_left_aligned(text, width);
}

}  // namespace

std::vector<size_t> fit_columns(const std::vector<TableColumn>& columns, int width) {
  std::vector<size_t> shown(columns.size());
  std::iota(shown.begin(), shown.end(), 0);
  while (!shown.empty() && used_width(columns, shown) > width) {
    const auto lowest = std::min_element(shown.begin(), shown.end(), [&](size_t a, size_t b) {
      // Among equal priorities the rightmost goes first.
      return columns[a].priority < columns[b].priority ||
             (columns[a].priority == columns[b].priority && a > b);
    });
    shown.erase(lowest);
  }
  return shown;
}

void draw_table(const TableView& view, const std::vector<TableColumn>& columns,
                const std::vector<std::vector<TableCell>>& rows, const std::vector<bool>& marked,
                const Theme& theme) {
  const int inner = view.width - kMarkWidth;
  const std::vector<size_t> shown = fit_columns(columns, inner);
  const int spare = std::max(0, inner - used_width(columns, shown));
  const auto grower = std::find_if(shown.begin(), shown.end(), [&](size_t i) { return columns[i].grow; });
  const auto width_of = [&](size_t k) {
    return columns[shown[k]].width + (grower != shown.end() && shown[k] == *grower ? spare : 0);
  };
  int col = view.col + kMarkWidth;
  for (size_t k = 0; k < shown.size(); ++k) {
    put(view.row, col, cell_text(columns[shown[k]], columns[shown[k]].header, width_of(k)),
        width_of(k), A_BOLD | A_UNDERLINE);
    col += width_of(k) + 1;
  }
  for (int line = 1; line < view.height; ++line) {
    const size_t r = view.first + static_cast<size_t>(line - 1);
    if (r >= rows.size()) break;
    const int y = view.row + line;
    const bool selected = static_cast<long>(r) == view.selected;
    const int row_attr = selected ? theme.attr(view.focused ? Tone::Selected : Tone::Dim) : 0;
    if (selected) fill_row(y, view.col, view.width, row_attr);
    if (r < marked.size() && marked[r]) put(y, view.col, "*", 1, theme.attr(Tone::Accent) | row_attr);
    col = view.col + kMarkWidth;
    for (size_t k = 0; k < shown.size(); ++k) {
      const TableCell& cell = rows[r][shown[k]];
      put(y, col, cell_text(columns[shown[k]], cell.text, width_of(k)), width_of(k),
          selected ? row_attr : theme.attr(cell.tone));
      col += width_of(k) + 1;
    }
  }
}

size_t scroll_to_show(size_t first, size_t selected, size_t visible) {
  if (visible == 0) return selected;
  if (selected < first) return selected;
  if (selected >= first + visible) return selected + 1 - visible;
  return first;
}

}  // namespace kiln::tui

namespace kiln::tui {

bool move_selection(int key, size_t count, size_t page, size_t& selected) {
  if (count == 0) return key == KEY_UP || key == KEY_DOWN || key == 'j' || key == 'k';
  const size_t last = count - 1;
  page = std::max<size_t>(page, 1);
  switch (key) {
    case KEY_UP: case 'k': selected = selected > 0 ? selected - 1 : 0; return true;
    case KEY_DOWN: case 'j': selected = std::min(selected + 1, last); return true;
    case KEY_PPAGE: selected = selected > page ? selected - page : 0; return true;
    case KEY_NPAGE: selected = std::min(selected + page, last); return true;
    case KEY_HOME: case 'g': selected = 0; return true;
    case KEY_END: case 'G': selected = last; return true;
    default: return false;
  }
}

}  // namespace kiln::tui
