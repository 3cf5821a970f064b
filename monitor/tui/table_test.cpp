#include "monitor/tui/table.h"

#include <curses.h>
#include <gtest/gtest.h>

namespace kiln::tui {
namespace {

const std::vector<TableColumn> kColumns = {
    {"STATUS", 9, false, 9}, {"NAME", 10, false, 10, true}, {"TAGS", 10, false, 3},
    {"STEP", 8, true, 8},    {"DEVICE", 16, false, 1}};

TEST(Table, EveryColumnWhenThereIsRoom) {
  EXPECT_EQ(fit_columns(kColumns, 9 + 10 + 10 + 8 + 16 + 5), (std::vector<size_t>{0, 1, 2, 3, 4}));
}

TEST(Table, TheLeastImportantColumnsDropFirstAndOrderStays) {
  EXPECT_EQ(fit_columns(kColumns, 50), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(fit_columns(kColumns, 30), (std::vector<size_t>{0, 1, 3}));
  EXPECT_EQ(fit_columns(kColumns, 12), (std::vector<size_t>{1}));
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
