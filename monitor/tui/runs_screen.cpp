#include "monitor/tui/runs_screen.h"

#include <curses.h>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/check.h"
#include "monitor/format/figures.h"
#include "monitor/tui/compare_screen.h"
#include "monitor/tui/draw.h"
#include "monitor/tui/launch_form.h"
#include "monitor/tui/run_screen.h"
#include "monitor/tui/sweep_screen.h"
#include "monitor/tui/table.h"
#include "store/run_figures.h"
#include "store/run_overview.h"
#include "store/run_queries.h"

namespace kiln::tui {
namespace {

enum Column { kStatus, kName, kTags, kLayout, kDevice, kStep, kLoss, kRate, kMfu, kStarted, kDuration };

// Each column as wide as its content where the terminal has room (monitor/tui/table.h); the
// widths here are the narrowest a column is cut to before the least useful drop out.
const std::vector<TableColumn>& columns() {
  static const std::vector<TableColumn> c = {
      {"STATUS", 9, false, 9},   {"NAME", 16, false, 10}, {"TAGS", 10, false, 3},
      {"LAYOUT", 11, false, 2},  {"DEVICE", 12, false, 1}, {"STEP", 11, true, 8},
      {"LOSS", 7, true, 7},      {"TOK/S", 7, true, 6},    {"MFU", 6, true, 5},
      {"STARTED", 16, false, 4}, {"DURATION", 8, true, 5}};
  return c;
}

// Absent numbers sort after every present one, whichever the direction.
int compare_numbers(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) - std::isnan(b);
  return (a > b) - (a < b);
}

int compare_lines(const store::RunOverview& a, const store::RunOverview& b, int column) {
  const auto text = [](const std::string& x, const std::string& y) { return x.compare(y); };
  switch (column) {
    case kStatus: return text(std::string(to_string(a.run.status)), std::string(to_string(b.run.status)));
    case kName: return text(a.run.name, b.run.name);
    case kTags: return text(join(a.run.tags, ","), join(b.run.tags, ","));
    case kLayout: return text(a.run.layout, b.run.layout);
    case kDevice: return text(a.run.device, b.run.device);
    case kStep:
      return compare_numbers(static_cast<double>(a.run.last_step.value_or(-1)),
                             static_cast<double>(b.run.last_step.value_or(-1)));
    case kLoss: return compare_numbers(a.loss, b.loss);
    case kRate: return compare_numbers(a.tokens_per_s, b.tokens_per_s);
    case kMfu: return compare_numbers(a.mfu, b.mfu);
    case kStarted:
      return compare_numbers(a.run.started_at.value_or(a.run.created_at),
                             b.run.started_at.value_or(b.run.created_at));
    default: return compare_numbers(a.duration_s, b.duration_s);
  }
}

std::vector<TableCell> cells(const store::RunOverview& l) {
  const store::RunRecord& run = l.run;
  return {{std::string(store::to_string(run.status)), status_tone(run.status)},
          {run.name},
          {run.tags.empty() ? kAbsent : join(run.tags, ","), Tone::Accent},
          {run.layout.empty() ? kAbsent : run.layout},
          {run.device.empty() ? run.backend : run.backend + " " + run.device, Tone::Dim},
          {steps_text(l)},
          {fixed4(l.loss)},
          {compact_rate(l.tokens_per_s)},
          {percent(l.mfu), mfu_tone(l.mfu)},
          {local_minute(run.started_at.value_or(run.created_at)), Tone::Dim},
          {duration_or_absent(l.duration_s)}};
}

class RunsScreen final : public Screen {
 public:
  explicit RunsScreen(LaunchSetup launch) : launch_(std::move(launch)) {}

  void load(Session& session) override {
    store::Database& db = session.reader();
    const double now = store::unix_now();
    lines_.clear();
    store::RunFilter filter;
    filter.config = where_;  // the store answers config matches; the regex is matched here
    for (auto& run : store::list_runs(db, filter)) lines_.push_back(store::run_overview(db, std::move(run), now));
    arrange();
  }

  void draw(Session& session, int height) override {
    const Theme& theme = session.theme();
    fill_row(0, 0, COLS, theme.attr(Tone::Title));
    // The store's path last: on a narrow terminal it is what gets cut, not the state.
    std::string title = fmt::format(" kiln · {} runs", lines_.size());
    if (shown_.size() != lines_.size()) title += fmt::format(" ({} shown)", shown_.size());
    if (!filter_.empty()) title += " · filter /" + filter_ + "/";
    title += fmt::format(" · sort {} {}", columns()[static_cast<size_t>(sort_)].header,
                         descending_ ? "desc" : "asc");
    if (!marked_.empty()) title += fmt::format(" · {} marked", marked_.size());
    title += " · " + session.store_path();
    put(0, 0, title, COLS, theme.attr(Tone::Title));
    if (lines_.empty()) {
      put(2, 2, "No runs in " + session.store_path() + " yet.", COLS - 4, A_BOLD);
      put(3, 2, "Press n to launch one, or record one with `kiln train --store " +
                    session.store_path() + "`.", COLS - 4, 0);
      return;
    }
    std::vector<std::vector<TableCell>> rows;
    std::vector<bool> marked;
    for (size_t i : shown_) {
      rows.push_back(cells(lines_[i]));
      marked.push_back(marked_.count(lines_[i].run.id) > 0);
    }
    visible_ = static_cast<size_t>(std::max(1, height - 2));
    first_ = scroll_to_show(first_, selected_, visible_);
    TableView view{1, 0, COLS, height - 1, first_, static_cast<long>(selected_), true};
    draw_table(view, columns(), rows, marked, theme);
    if (shown_.empty()) put(3, 2, "No run matches /" + filter_ + "/ (/ and Enter clears the filter)", COLS - 4, 0);
  }

  Outcome key(int key, Session& session) override {
    if (prompt_) return prompt_key(key, session);
    if (move_selection(key, shown_.size(), visible_, selected_)) {
      remember_selection();
      return Outcome::handled();
    }
    switch (key) {
      case '\n': case '\r': case KEY_ENTER:
        if (shown_.empty()) return Outcome::handled();
        return Outcome::push(make_run_screen(lines_[shown_[selected_]].run.id));
      case ' ':
        if (shown_.empty()) return Outcome::handled();
        if (const int64_t id = lines_[shown_[selected_]].run.id; !marked_.erase(id)) marked_.insert(id);
        selected_ = std::min(selected_ + 1, shown_.size() - 1);
        remember_selection();
        return Outcome::handled();
      case '/':
        prompt_.emplace(Prompt::Kind::Text, "filter (regex on name, tags, status, device; KEY=VALUE words: config):",
                        filter_);
        return Outcome::handled();
      case '<': case KEY_LEFT: sort_ = (sort_ + kDuration) % (kDuration + 1); arrange(); return Outcome::handled();
      case '>': case KEY_RIGHT: sort_ = (sort_ + 1) % (kDuration + 1); arrange(); return Outcome::handled();
      case 'r': descending_ = !descending_; arrange(); return Outcome::handled();
      case 'n': return Outcome::push(make_launch_form(launch_));
      case 'c': {
        std::vector<int64_t> ids;
        for (const auto& line : lines_)
          if (marked_.count(line.run.id)) ids.push_back(line.run.id);
        if (ids.size() < 2) {
          session.flash("mark two or more runs with Space, then c compares them", Tone::Warn);
          return Outcome::handled();
        }
        return Outcome::push(make_compare_screen(ids));
      }
      case 'S': {
        if (shown_.empty()) return Outcome::handled();
        const store::RunRecord& run = lines_[shown_[selected_]].run;
        if (!run.sweep_id) {
          session.flash("run " + run.name + " is not part of a sweep", Tone::Warn);
          return Outcome::handled();
        }
        return Outcome::push(make_sweep_screen(*run.sweep_id));
      }
      default: return Outcome::ignored();
    }
  }

  std::vector<KeyHint> hints() const override {
    return {{"Enter", "Open"}, {"Space", "Mark"}, {"c", "Compare"}, {"n", "New"},
            {"/", "Filter"}, {"<>", "Sort"}, {"?", "Help"}, {"q", "Quit"}};
  }

  std::vector<KeyHint> help() const override {
    return {{"Enter", "open the selected run"},
            {"Space", "mark / unmark the run for comparison"},
            {"c", "compare the marked runs"},
            {"S", "open the sweep the selected run is a point of"},
            {"n", "launch a new run (the launch form)"},
            {"/", "filter by a regex and config KEY=VALUE words (empty clears it)"},
            {"< > Left Right", "sort by the previous / next column"},
            {"r", "reverse the sort"}};
  }

  std::string title() const override { return "Runs"; }
  const Prompt* prompt() const override { return prompt_ ? &*prompt_ : nullptr; }

 private:
  Outcome prompt_key(int key, Session& session) {
    const Prompt::Result result = prompt_->key(key);
    if (result == Prompt::Result::Accepted) {
      // Words KEY=VALUE with a config key (train.lr=3e-4) go to the store; the rest is the regex.
      std::vector<store::ConfigMatch> where;
      std::string regex;
      std::istringstream words(prompt_->text());
      for (std::string word; words >> word;) {
        if (word.find('=') != std::string::npos) {
          try {
            where.push_back(store::parse_config_match(word));
            continue;
          } catch (const Error&) {
            // not a config key: part of the regex
          }
        }
        regex += (regex.empty() ? "" : " ") + word;
      }
      try {
        pattern_ = std::regex(regex, std::regex::ECMAScript | std::regex::icase);
        regex_ = regex;
        filter_ = prompt_->text();
        where_ = std::move(where);
        load(session);
      } catch (const std::regex_error& e) {
        session.flash("not a regex: /" + regex + "/: " + e.what(), Tone::Bad);
      }
      arrange();
    }
    if (result != Prompt::Result::Open) prompt_.reset();
    return Outcome::handled();
  }

  bool matches(const store::RunOverview& l) const {
    if (regex_.empty()) return true;
    const std::string haystack = l.run.name + " " + join(l.run.tags, ",") + " " +
                                 std::string(store::to_string(l.run.status)) + " " + l.run.device;
    return std::regex_search(haystack, pattern_);
  }

  // Filters and sorts, keeping the selected run selected when it is still shown.
  void arrange() {
    shown_.clear();
    for (size_t i = 0; i < lines_.size(); ++i)
      if (matches(lines_[i])) shown_.push_back(i);
    std::stable_sort(shown_.begin(), shown_.end(), [&](size_t a, size_t b) {
      const int c = compare_lines(lines_[a], lines_[b], sort_);
      return descending_ ? c > 0 : c < 0;
    });
    selected_ = 0;
    for (size_t k = 0; k < shown_.size(); ++k)
      if (lines_[shown_[k]].run.id == selected_id_) selected_ = k;
    remember_selection();
  }

  void remember_selection() {
    if (selected_ < shown_.size()) selected_id_ = lines_[shown_[selected_]].run.id;
  }

  LaunchSetup launch_;
  std::vector<store::RunOverview> lines_;
  std::vector<size_t> shown_;
  size_t selected_ = 0, first_ = 0, visible_ = 1;
  int64_t selected_id_ = 0;  // follows the run, not the row, as the table re-sorts
  std::set<int64_t> marked_;
  std::string filter_;                  // as typed
  std::string regex_;                   // its words that are not config matches
  std::vector<store::ConfigMatch> where_;  // its KEY=VALUE words
  std::regex pattern_;
  int sort_ = kStarted;
  bool descending_ = true;
  std::optional<Prompt> prompt_;
};

}  // namespace

std::unique_ptr<Screen> make_runs_screen(LaunchSetup launch) {
  return std::make_unique<RunsScreen>(std::move(launch));
}

}  // namespace kiln::tui
