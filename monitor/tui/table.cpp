#include "monitor/tui/table.h"

#include <curses.h>

#include <algorithm>

#include "base/terminal_text.h"
#include "monitor/tui/draw.h"

namespace kiln::tui {
namespace {

constexpr int kMarkWidth = 2;  // "* " before a marked row

// The columns a cell takes on screen: its control characters as the escapes put() shows.
int shown_width(const std::string& text) { return text_width(terminal_line(text)); }

int used_width(const std::vector<FittedColumn>& fitted) {
  int width = 0;
  for (const FittedColumn& f : fitted) width += f.width + 1;
  return width;
}

// The text in exactly `width` columns: padded, or cut with an ellipsis at its end.
std::string cell_text(const TableColumn& column, const std::string& text, int width, bool unicode) {
  std::string shown = terminal_line(text);
  if (width > 0 && text_width(shown) > width) shown = clip(shown, width - 1) + (unicode ? "…" : "~");
  return column.right ? pad_right_aligned(shown, width) : pad_left_aligned(shown, width);
}

}  // namespace

std::vector<FittedColumn> fit_columns(const std::vector<TableColumn>& columns,
                                      const std::vector<std::vector<TableCell>>& rows, int width) {
  std::vector<int> content(columns.size());
  for (size_t i = 0; i < columns.size(); ++i) content[i] = text_width(columns[i].header);
  for (const auto& row : rows)
    for (size_t i = 0; i < std::min(row.size(), columns.size()); ++i)
      content[i] = std::max(content[i], shown_width(row[i].text));

  // Each column at its narrowest; the least important (the rightmost among equals) drop out
  // until those fit.
  std::vector<FittedColumn> fitted;
  for (size_t i = 0; i < columns.size(); ++i) fitted.push_back({i, std::min(columns[i].width, content[i])});
  while (!fitted.empty() && used_width(fitted) > width) {
    fitted.erase(std::min_element(fitted.begin(), fitted.end(), [&](const FittedColumn& a, const FittedColumn& b) {
      const TableColumn &x = columns[a.index], &y = columns[b.index];
      return x.priority < y.priority || (x.priority == y.priority && a.index > b.index);
    }));
  }

  // The room left, a column at a time to each column still cut, the most important first, so
  // the cut columns widen together.
  std::vector<FittedColumn*> by_priority;
  for (FittedColumn& f : fitted) by_priority.push_back(&f);
  std::stable_sort(by_priority.begin(), by_priority.end(), [&](const FittedColumn* a, const FittedColumn* b) {
    return columns[a->index].priority > columns[b->index].priority;
  });
  int spare = width - used_width(fitted);
  for (bool widened = true; spare > 0 && widened;) {
    widened = false;
    for (FittedColumn* f : by_priority)
      if (spare > 0 && f->width < content[f->index]) {
        ++f->width;
        --spare;
        widened = true;
      }
  }
  const auto grower = std::find_if(fitted.begin(), fitted.end(), [&](const FittedColumn& f) { return columns[f.index].grow; });
  if (grower != fitted.end() && spare > 0) grower->width += spare;
  return fitted;
}

void draw_table(const TableView& view, const std::vector<TableColumn>& columns,
                const std::vector<std::vector<TableCell>>& rows, const std::vector<bool>& marked,
                const Theme& theme) {
  const std::vector<FittedColumn> fitted = fit_columns(columns, rows, view.width - kMarkWidth);
  int col = view.col + kMarkWidth;
  for (const FittedColumn& f : fitted) {
    put(view.row, col, cell_text(columns[f.index], columns[f.index].header, f.width, theme.unicode()), f.width,
        A_BOLD | A_UNDERLINE);
    col += f.width + 1;
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
    for (const FittedColumn& f : fitted) {
      const TableCell& cell = rows[r][f.index];
      put(y, col, cell_text(columns[f.index], cell.text, f.width, theme.unicode()), f.width,
          selected ? row_attr : theme.attr(cell.tone));
      col += f.width + 1;
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
