#include "monitor/tui/compare_screen.h"

#include <curses.h>
#include <fmt/core.h>

#include <algorithm>

#include "monitor/format/config_text.h"
#include "monitor/format/figures.h"
#include "monitor/tui/draw.h"
#include "monitor/tui/plot.h"
#include "monitor/tui/table.h"
#include "store/metric_queries.h"
#include "store/run_comparison.h"

namespace kiln::tui {
namespace {

// Each run's colour, in mark order; they repeat after four runs.
constexpr Tone kRunTones[] = {Tone::Good, Tone::Info, Tone::Accent, Tone::Warn};
// The plot keeps at least this many rows (title and x axis included) however many config
// keys differ; the keys that do not fit are counted instead.
constexpr int kMinPlotRows = 10;
constexpr int kMaxKeyWidth = 36;

Tone run_tone(size_t index) { return kRunTones[index % std::size(kRunTones)]; }

const std::vector<TableColumn>& summary_columns() {
  static const std::vector<TableColumn> c = {
      {"RUN", 20, false, 10, true}, {"STATUS", 9, false, 8},  {"STEP", 8, true, 9},
      {"FINAL", 7, true, 9},  {"BEST", 7, true, 7},     {"AT", 7, true, 3},
      {"VALID", 7, true, 6},  {"TOK/S", 7, true, 5},    {"MFU", 6, true, 4},
      {"ELAPSED", 9, true, 5}};
  return c;
}

// KEY as wide as its longest key (up to a limit), then one column per run sharing the rest.
std::vector<TableColumn> diff_columns(const store::RunComparison& comparison) {
  int key_width = 3;
  for (const auto& d : comparison.diff) key_width = std::max(key_width, text_width(d.key));
  key_width = std::min(key_width, kMaxKeyWidth);
  const int runs = static_cast<int>(std::max<size_t>(comparison.runs.size(), 1));
  const int share = std::max(8, (COLS - 2 - (key_width + 1)) / runs - 1);
  std::vector<TableColumn> c = {{"KEY", key_width, false, 10}};
  for (const auto& run : comparison.runs) c.push_back({run.name, share, false, 5});
  return c;
}

class CompareScreen final : public Screen {
 public:
  explicit CompareScreen(std::vector<int64_t> ids) : ids_(std::move(ids)) {}

  void load(Session& session) override {
    store::Database& db = session.reader();
    comparison_ = store::compare_runs(db, ids_);
    curves_.clear();
    for (size_t i = 0; i < ids_.size(); ++i) {
      store::SeriesQuery query;
      query.max_points = static_cast<size_t>(std::max(2 * COLS, 32));
      query.ranks = {0};  // the loss, the same on every rank; rank 0 keeps every row
      PlotSeries curve;
      curve.tone = run_tone(i);
      const auto ranks = store::metric_series(db, ids_[i], query);
      if (!ranks.empty())
        for (const auto& p : ranks.front().points) {
          curve.x.push_back(static_cast<double>(p.step));
          curve.y.push_back(p.value);
        }
      curves_.push_back(std::move(curve));
    }
  }

  void draw(Session& session, int height) override {
    const Theme& theme = session.theme();
    fill_row(0, 0, COLS, theme.attr(Tone::Title));
    put(0, 0, fmt::format(" compare {} runs", ids_.size()), COLS, theme.attr(Tone::Title));
    std::vector<std::vector<TableCell>> rows;
    for (size_t i = 0; i < comparison_.summaries.size(); ++i) {
      const store::RunSummary& s = comparison_.summaries[i];
      rows.push_back({{s.name, run_tone(i)},
                      {std::string(store::to_string(s.status)), status_tone(s.status)},
                      {s.last_step ? std::to_string(*s.last_step) : kAbsent},
                      {fixed4(s.final_loss)},
                      {fixed4(s.best_loss)},
                      {s.best_step ? std::to_string(*s.best_step) : kAbsent},
                      {fixed4(s.best_valid_loss)},
                      {compact_rate(s.mean_tokens_per_s)},
                      {percent(s.mean_mfu), mfu_tone(s.mean_mfu)},
                      {duration_or_absent(s.elapsed_s)}});
    }
    const int table_height = static_cast<int>(rows.size()) + 1;
    draw_table(TableView{2, 0, COLS, table_height, 0, -1, false}, summary_columns(), rows, {}, theme);
    const int plot_top = draw_config_diff(3 + table_height, height, theme) + 1;
    const std::string title = std::string("loss by step") + (log_y_ ? ", log scale" : "") +
                              " (colours as in the table)";
    draw_plot(plot_top, 0, height - plot_top, COLS, title, curves_, theme, PlotAxes{"step", log_y_});
  }

  Outcome key(int key, Session&) override {
    if (key != 'l') return Outcome::ignored();
    log_y_ = !log_y_;
    return Outcome::handled();
  }

  std::vector<KeyHint> hints() const override {
    return {{"l", log_y_ ? "Linear" : "Log scale"}, {"?", "Help"}, {"q", "Back"}};
  }

  std::vector<KeyHint> help() const override {
    return {{"l", "loss on a log scale / back to linear"},
            {"", "the runs marked with Space on the runs screen: their"},
            {"", "figures, the config keys that differ, loss curves overlaid"}};
  }

  std::string title() const override { return "Compare"; }

 private:
  // The config keys whose values differ, as many as leave the plot its rows; returns the
  // row after the last one drawn.
  int draw_config_diff(int row, int height, const Theme& theme) {
    const auto& diff = comparison_.diff;
    if (diff.empty()) {
      put(row, 1, "configs: identical", COLS - 2, A_BOLD);
      return row + 1;
    }
    // Title, header and rows, then a blank row above the plot.
    const int room = std::max(1, height - row - 3 - kMinPlotRows);
    const size_t shown = std::min(diff.size(), static_cast<size_t>(room));
    std::string title = fmt::format("config differences ({} key{})", diff.size(), diff.size() == 1 ? "" : "s");
    if (shown < diff.size()) {
      std::string ids;
      for (const int64_t id : ids_) ids += fmt::format(" {}", id);
      title += fmt::format("; {} not shown, `kiln runs compare{}` lists all", diff.size() - shown, ids);
    }
    put(row, 1, title, COLS - 2, A_BOLD);
    std::vector<std::vector<TableCell>> cells;
    for (size_t k = 0; k < shown; ++k) {
      std::vector<TableCell> line = {{diff[k].key, Tone::Dim}};
      for (size_t i = 0; i < diff[k].values.size(); ++i)
        line.push_back({config_value(diff[k].values[i]), run_tone(i)});
      cells.push_back(std::move(line));
    }
    const int rows = static_cast<int>(shown) + 1;
    draw_table(TableView{row + 1, 0, COLS, rows, 0, -1, false}, diff_columns(comparison_), cells, {}, theme);
    return row + 1 + rows;
  }

  std::vector<int64_t> ids_;
  store::RunComparison comparison_;
  std::vector<PlotSeries> curves_;
  bool log_y_ = false;
};

}  // namespace

std::unique_ptr<Screen> make_compare_screen(std::vector<int64_t> run_ids) {
  return std::make_unique<CompareScreen>(std::move(run_ids));
}

}  // namespace kiln::tui
