#include "monitor/tui/compare_screen.h"

#include <curses.h>
#include <fmt/core.h>

#include <algorithm>

#include "monitor/format/figures.h"
#include "monitor/tui/draw.h"
#include "monitor/tui/plot.h"
#include "monitor/tui/table.h"
#include "store/metric_queries.h"

namespace kiln::tui {
namespace {

// Each run's colour, in tag order; they repeat after four runs.
constexpr Tone kRunTones[] = {Tone::Good, Tone::Info, Tone::Accent, Tone::Warn};

Tone run_tone(size_t index) { return kRunTones[index % std::size(kRunTones)]; }

const std::vector<TableColumn>& columns() {
  static const std::vector<TableColumn> c = {
      {"RUN", 20, false, 10, true}, {"STATUS", 9, false, 8},  {"STEP", 8, true, 9},
      {"FINAL", 7, true, 9},  {"BEST", 7, true, 7},     {"AT", 7, true, 3},
      {"VALID", 7, true, 6},  {"TOK/S", 7, true, 5},    {"MFU", 6, true, 4},
      {"ELAPSED", 9, true, 5}};
  return c;
}

class CompareScreen final : public Screen {
 public:
  explicit CompareScreen(std::vector<int64_t> ids) : ids_(std::move(ids)) {}

  void load(Session& session) override {
    store::Database& db = session.reader();
    summaries_.clear();
    curves_.clear();
    for (size_t i = 0; i < ids_.size(); ++i) {
      summaries_.push_back(store::summarize_run(db, ids_[i]));
      store::SeriesQuery query;
      query.max_points = static_cast<size_t>(std::max(2 * COLS, 32));
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
    for (size_t i = 0; i < summaries_.size(); ++i) {
      const store::RunSummary& s = summaries_[i];
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
    draw_table(TableView{2, 0, COLS, table_height, 0, -1, false}, columns(), rows, {}, theme);
    const int plot_top = 3 + table_height;
    draw_plot(plot_top, 0, height - plot_top, COLS, "loss by step (colours as in the table)",
              curves_, theme);
  }

  Outcome key(int, Session&) override { return Outcome::ignored(); }

  std::vector<KeyHint> hints() const override { return {{"?", "Help"}, {"q", "Back"}}; }

  std::vector<KeyHint> help() const override {
    return {{"", "runs tagged with Space on the runs screen, loss curves overlaid"}};
  }

  std::string title() const override { return "Compare"; }

 private:
  std::vector<int64_t> ids_;
  std::vector<store::RunSummary> summaries_;
  std::vector<PlotSeries> curves_;
};

}  // namespace

std::unique_ptr<Screen> make_compare_screen(std::vector<int64_t> run_ids) {
  return std::make_unique<CompareScreen>(std::move(run_ids));
}

}  // namespace kiln::tui
