#include "monitor/tui/table.h"

#include <curses.h>
#include <gtest/gtest.h>

namespace kiln::tui {
namespace {

const std::vector<TableColumn> kColumns = {
    {"STATUS", 9, false, 9}, {"NAME", 10, false, 10}, {"TAGS", 10, false, 3},
    {"STEP", 8, true, 8},    {"DEVICE", 16, false, 1}};

// A row whose cells are `widths` columns of text.
std::vector<TableCell> row_of(const std::vector<int>& widths) {
  std::vector<TableCell> row;
  for (int w : widths) row.push_back({std::string(static_cast<size_t>(w), 'x')});
  return row;
}

std::vector<size_t> indices(const std::vector<FittedColumn>& fitted) {
  std::vector<size_t> out;
  for (const FittedColumn& f : fitted) out.push_back(f.index);
  return out;
}

std::vector<int> widths(const std::vector<FittedColumn>& fitted) {
  std::vector<int> out;
  for (const FittedColumn& f : fitted) out.push_back(f.width);
  return out;
}

// Cells as wide as each column's narrowest.
const std::vector<std::vector<TableCell>> kFullRows = {row_of({9, 10, 10, 8, 16})};

TEST(Table, EveryColumnWhenThereIsRoom) {
  EXPECT_EQ(indices(fit_columns(kColumns, kFullRows, 9 + 10 + 10 + 8 + 16 + 5)), (std::vector<size_t>{0, 1, 2, 3, 4}));
}

TEST(Table, TheLeastImportantColumnsDropFirstAndOrderStays) {
  EXPECT_EQ(indices(fit_columns(kColumns, kFullRows, 50)), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(indices(fit_columns(kColumns, kFullRows, 30)), (std::vector<size_t>{0, 1, 3}));
  EXPECT_EQ(indices(fit_columns(kColumns, kFullRows, 12)), (std::vector<size_t>{1}));
}

// A column is as wide as its header or its longest cell: short ones leave their room to the
// others, long ones take what they need when the row has it.
TEST(Table, WidthsFollowTheContent) {
  const std::vector<std::vector<TableCell>> rows = {row_of({7, 5, 0, 3, 30}), row_of({9, 12, 2, 2, 35})};
  // STATUS 9, NAME 12, TAGS 4 (its header), STEP 4 (its header), DEVICE 35: 64 and 5 spaces.
  EXPECT_EQ(widths(fit_columns(kColumns, rows, 69)), (std::vector<int>{9, 12, 4, 4, 35}));
  // More room than the content needs: nothing grows without a growing column.
  EXPECT_EQ(widths(fit_columns(kColumns, rows, 160)), (std::vector<int>{9, 12, 4, 4, 35}));
}

// The table at 160 columns: a long name no longer takes the row from the tags and
// the device; with less room the columns still cut widen together.
TEST(Table, TheRoomLeftIsSharedByTheColumnsStillCut) {
  const std::vector<std::vector<TableCell>> rows = {row_of({9, 30, 30, 8, 40})};
  // Narrowest: 9 + 10 + 10 + 8 + 16 = 53, and 5 spaces; 12 columns left for NAME, TAGS and
  // DEVICE, 4 each.
  EXPECT_EQ(widths(fit_columns(kColumns, rows, 70)), (std::vector<int>{9, 14, 14, 8, 20}));
  // Room for all: each whole.
  EXPECT_EQ(widths(fit_columns(kColumns, rows, 160)), (std::vector<int>{9, 30, 30, 8, 40}));
  // A name of 14 is whole after 4 each; TAGS and DEVICE share the other 20.
  const std::vector<std::vector<TableCell>> short_name = {row_of({9, 14, 30, 8, 40})};
  EXPECT_EQ(widths(fit_columns(kColumns, short_name, 90)), (std::vector<int>{9, 14, 24, 8, 30}));
}

TEST(Table, AGrowingColumnTakesWhatIsLeftOnceEveryCellIsWhole) {
  std::vector<TableColumn> columns = kColumns;
  columns[1].grow = true;
  const std::vector<std::vector<TableCell>> rows = {row_of({9, 30, 3, 8, 20})};
  // Whole: 9 + 30 + 4 (TAGS' header) + 8 + 20 and 5 spaces, 76; NAME takes the rest.
  EXPECT_EQ(widths(fit_columns(columns, rows, 100)), (std::vector<int>{9, 30 + 24, 4, 8, 20}));
  EXPECT_EQ(widths(fit_columns(columns, rows, 77)), (std::vector<int>{9, 31, 4, 8, 20}));
  // Less room: NAME is cut like any other, widening with DEVICE (whole after 4) and then alone.
  EXPECT_EQ(widths(fit_columns(columns, rows, 66)), (std::vector<int>{9, 20, 4, 8, 20}));
}

// A control character counts as the escape drawn for it (ESC as \x1b: four columns).
TEST(Table, ControlCharactersCountAsTheirEscapes) {
  const std::vector<std::vector<TableCell>> rows = {{{"running"}, {"a\x1b" "b"}, {""}, {"1"}, {"cpu"}}};
  EXPECT_EQ(fit_columns(kColumns, rows, 100)[1].width, 6);
}

TEST(Table, ScrollingKeepsTheSelectionInView) {
  EXPECT_EQ(scroll_to_show(0, 3, 5), 0u);
  EXPECT_EQ(scroll_to_show(0, 7, 5), 3u);
  EXPECT_EQ(scroll_to_show(6, 2, 5), 2u);
}

TEST(Table, ListKeysMoveWithinTheRows) {
  size_t selected = 0;
  EXPECT_TRUE(move_selection('j', 10, 4, selected));
  EXPECT_EQ(selected, 1u);
  EXPECT_TRUE(move_selection(KEY_NPAGE, 10, 4, selected));
  EXPECT_EQ(selected, 5u);
  EXPECT_TRUE(move_selection('G', 10, 4, selected));
  EXPECT_EQ(selected, 9u);
  EXPECT_TRUE(move_selection(KEY_DOWN, 10, 4, selected));
  EXPECT_EQ(selected, 9u);
  EXPECT_TRUE(move_selection('g', 10, 4, selected));
  EXPECT_EQ(selected, 0u);
  EXPECT_TRUE(move_selection('k', 10, 4, selected));
  EXPECT_EQ(selected, 0u);
  EXPECT_FALSE(move_selection('x', 10, 4, selected));
}

}  // namespace
}  // namespace kiln::tui
