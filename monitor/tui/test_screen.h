// For the drawing tests: a curses screen of a given size that writes nowhere, so a test can
// draw into it and read back, as UTF-8, what a terminal would show.
#pragma once

#include <curses.h>
#include <gtest/gtest.h>

#include <climits>
#include <clocale>
#include <cstdio>
#include <cwchar>
#include <string>
#include <vector>

namespace kiln::tui {

class TestScreen {
 public:
  TestScreen(int width, int height)
      : out_(std::fopen("/dev/null", "w")), in_(std::fopen("/dev/null", "r")) {
    // Braille and block glyphs are drawn as UTF-8.
    std::setlocale(LC_ALL, "C.UTF-8");
    screen_ = newterm("xterm", out_, in_);
    EXPECT_NE(screen_, nullptr) << "no terminfo entry for xterm";
    set_term(screen_);
    resize_term(height, width);
    erase();
  }
  ~TestScreen() {
    endwin();
    delscreen(screen_);
    std::fclose(out_);
    std::fclose(in_);
  }
  TestScreen(const TestScreen&) = delete;
  TestScreen& operator=(const TestScreen&) = delete;

  // Row y as drawn, trailing spaces dropped.
  std::string row(int y) const {
    std::string text = read(y, 0, COLS);
    return text.erase(text.find_last_not_of(' ') + 1);
  }

  // The character in column x of row y.
  std::string cell(int y, int x) const { return read(y, x, 1); }

  // The curses attributes (bold, underline, colour pair...) of column x of row y.
  int attributes(int y, int x) const { return static_cast<int>(mvinch(y, x) & A_ATTRIBUTES); }

  // Every row, one per line.
  std::string text() const {
    std::string all;
    for (int y = 0; y < LINES; ++y) all += row(y) + "\n";
    return all;
  }

 private:
  static std::string read(int y, int x, int columns) {
    std::vector<wchar_t> cells(static_cast<size_t>(columns) + 1, L'\0');
    mvinnwstr(y, x, cells.data(), columns);
    std::string text;
    for (const wchar_t* c = cells.data(); *c; ++c) {
      char bytes[MB_LEN_MAX];
      std::mbstate_t state{};
      const size_t n = std::wcrtomb(bytes, *c, &state);
      if (n != static_cast<size_t>(-1)) text.append(bytes, n);
    }
    return text;
  }

  std::FILE* out_;
  std::FILE* in_;
  SCREEN* screen_ = nullptr;
};

}  // namespace kiln::tui
