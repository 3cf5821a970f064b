#include "monitor/tui/sweep_screen.h"

#include <curses.h>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "monitor/format/figures.h"
#include "monitor/tui/draw.h"
#include "monitor/tui/run_screen.h"
#include "monitor/tui/scatter.h"
#include "monitor/tui/table.h"
#include "store/sweep_queries.h"

namespace kiln::tui {
namespace {

// The scatter keeps at least this many rows (title and x axis included) however many
// points there are; the table scrolls instead.
constexpr int kMinScatterRows = 8;
constexpr int kMaxParamWidth = 14;

const char* metric_label(std::string_view metric) {
  return metric == "final_valid_loss" ? "final valid loss" : "final loss";
}

double metric_of(const store::SweepPointRow& p, std::string_view metric) {
  return metric == "final_valid_loss" ? p.final_valid_loss : p.final_loss;
}

// One point's parameters, parsed; a value as text: numbers as short as they read back.
struct PointParams {
  nlohmann::json values;
  std::string text(const std::string& key) const {
    if (!values.is_object() || !values.contains(key)) return kAbsent;
    const auto& v = values[key];
    return v.is_number() ? shortest(v.get<double>()) : v.is_string() ? v.get<std::string>() : v.dump();
  }
  double number(const std::string& key) const {
    return values.is_object() && values.contains(key) && values[key].is_number() ? values[key].get<double>() : NAN;
  }
};

class SweepScreen final : public Screen {
 public:
  explicit SweepScreen(int64_t sweep_id) : sweep_id_(sweep_id) {}

  void load(Session& session) override {
    const int64_t selected_point = selected_ < order_.size() ? details_.points[order_[selected_]].point : -1;
    details_ = store::sweep_details(session.reader(), sweep_id_);
    params_.clear();
    for (const auto& p : details_.points)
      params_.push_back({nlohmann::json::parse(p.params_json, nullptr, false)});
    best_ = store::best_point(details_.points);
    numeric_.clear();
    for (const auto& key : details_.parameters)
      if (std::any_of(params_.begin(), params_.end(), [&](const PointParams& p) { return !std::isnan(p.number(key)); }))
        numeric_.push_back(key);
    arrange(selected_point);
  }

  void draw(Session& session, int height) override {
    const Theme& theme = session.theme();
    const store::SweepSummary& s = details_.sweep;
    fill_row(0, 0, COLS, theme.attr(Tone::Title));
    std::string title = fmt::format(" sweep {} · {} · {}/{} done, {} running, {} failed", s.name,
                                    store::to_string(s.status), s.completed, s.points, s.running, s.failed);
    if (best_)
      title += fmt::format(" · {} point {} by {}", store::best_label(*best_), best_->point, metric_label(best_->metric));
    put(0, 0, title, COLS, theme.attr(Tone::Title));
    put(1, 1, s.command_line.empty() ? "(no command line recorded)" : s.command_line, COLS - 2, theme.attr(Tone::Dim));
    if (details_.points.empty()) {
      put(3, 2, "This sweep has no points.", COLS - 4, A_BOLD);
      return;
    }
    std::vector<std::vector<TableCell>> rows;
    std::vector<bool> marked;
    for (size_t i : order_) {
      rows.push_back(cells(i));
      marked.push_back(best_ && details_.points[i].point == best_->point);
    }
    const int room = height - 3;
    const int table_height = std::clamp(static_cast<int>(rows.size()) + 1, 2, std::max(2, room - kMinScatterRows - 1));
    visible_ = static_cast<size_t>(std::max(1, table_height - 1));
    first_ = scroll_to_show(first_, selected_, visible_);
    draw_table(TableView{2, 0, COLS, table_height, first_, static_cast<long>(selected_), true}, columns(), rows, marked, theme);
    const int scatter_top = 3 + table_height;
    if (numeric_.empty()) {
      put(scatter_top, 1, "no swept parameter has numeric values to plot", COLS - 2, theme.attr(Tone::Dim));
      return;
    }
    const std::string& key = numeric_[scatter_key_ % numeric_.size()];
    const std::string_view metric = best_ ? best_->metric : "final_loss";
    std::vector<ScatterPoint> points;
    for (size_t i = 0; i < details_.points.size(); ++i)
      points.push_back({params_[i].number(key), metric_of(details_.points[i], metric),
                        best_ && details_.points[i].point == best_->point});
    draw_scatter(scatter_top, 0, height - scatter_top, COLS,
                 fmt::format("{} by {} (* the best point; p: next parameter)", metric_label(metric), key), points, key, theme);
  }

  Outcome key(int key, Session& session) override {
    if (move_selection(key, order_.size(), visible_, selected_)) return Outcome::handled();
    switch (key) {
      case '\n': case '\r': case KEY_ENTER: {
        if (order_.empty()) return Outcome::handled();
        const store::SweepPointRow& p = details_.points[order_[selected_]];
        if (!p.run_id) {
          session.flash(fmt::format("point {} has no run yet", p.point), Tone::Warn);
          return Outcome::handled();
        }
        return Outcome::push(make_run_screen(*p.run_id));
      }
      case 'p':
        if (!numeric_.empty()) scatter_key_ = (scatter_key_ + 1) % numeric_.size();
        return Outcome::handled();
      case 's':
        by_loss_ = !by_loss_;
        arrange(order_.empty() ? -1 : details_.points[order_[selected_]].point);
        return Outcome::handled();
      default: return Outcome::ignored();
    }
  }

  std::vector<KeyHint> hints() const override {
    return {{"Enter", "Open run"}, {"p", "Parameter"}, {"s", by_loss_ ? "By point" : "By loss"}, {"?", "Help"}, {"q", "Back"}};
  }

  std::vector<KeyHint> help() const override {
    return {{"Enter", "open the selected point's run"},
            {"p", "plot the loss against the next swept parameter"},
            {"s", "sort the points by loss (best first) / by point"},
            {"", "* marks the best completed point: the lowest final"},
            {"", "validation loss, or final loss when none validated;"},
            {"", "before any completes, the best so far (partial)"}};
  }

  std::string title() const override { return "Sweep"; }

 private:
  std::vector<TableColumn> columns() const {
    std::vector<TableColumn> c = {{"#", 5, true, 10}};
    for (const auto& key : details_.parameters) {
      int width = text_width(key);
      for (const auto& p : params_) width = std::max(width, text_width(p.text(key)));
      c.push_back({key, std::min(width, kMaxParamWidth), true, 8});
    }
    const std::vector<TableColumn> figures = {
        {"RUN", 16, false, 6, true}, {"STATUS", 9, false, 9}, {"STEP", 7, true, 5},  {"FINAL", 7, true, 9},
        {"BEST", 7, true, 4},        {"V.FINAL", 7, true, 7}, {"V.BEST", 7, true, 3}, {"TOK/S", 7, true, 2}};
    c.insert(c.end(), figures.begin(), figures.end());
    return c;
  }

  std::vector<TableCell> cells(size_t i) const {
    const store::SweepPointRow& p = details_.points[i];
    std::vector<TableCell> row = {{std::to_string(p.point), Tone::Dim}};
    for (const auto& key : details_.parameters) row.push_back({params_[i].text(key), Tone::Accent});
    const bool launched = !p.run_name.empty();
    row.insert(row.end(), {{launched ? p.run_name : kAbsent},
                           {launched ? std::string(store::to_string(p.status)) : "pending",
                            launched ? status_tone(p.status) : Tone::Dim},
                           {p.last_step ? std::to_string(*p.last_step) : kAbsent},
                           {fixed4(p.final_loss)},
                           {fixed4(p.best_loss)},
                           {fixed4(p.final_valid_loss)},
                           {fixed4(p.best_valid_loss)},
                           {compact_rate(p.tokens_per_s)}});
    return row;
  }

  // By point, or by the best point's metric (points without it last); the point that was
  // selected stays selected.
  void arrange(int64_t selected_point) {
    order_.resize(details_.points.size());
    for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
    if (by_loss_) {
      const std::string_view metric = best_ ? best_->metric : "final_loss";
      std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
        const double x = metric_of(details_.points[a], metric), y = metric_of(details_.points[b], metric);
        return std::isnan(y) ? !std::isnan(x) : !std::isnan(x) && x < y;
      });
    }
    selected_ = 0;
    for (size_t k = 0; k < order_.size(); ++k)
      if (details_.points[order_[k]].point == selected_point) selected_ = k;
  }

  int64_t sweep_id_;
  store::SweepDetails details_;
  std::vector<PointParams> params_;       // by index in details_.points
  std::optional<store::BestPoint> best_;
  std::vector<std::string> numeric_;      // the parameters the scatter can plot
  std::vector<size_t> order_;             // indices in details_.points, as shown
  size_t selected_ = 0, first_ = 0, visible_ = 1, scatter_key_ = 0;
  bool by_loss_ = false;
};

}  // namespace

std::unique_ptr<Screen> make_sweep_screen(int64_t sweep_id) { return std::make_unique<SweepScreen>(sweep_id); }

}  // namespace kiln::tui
