#include "monitor/tui/runs_screen.h"

#include <curses.h>
#include <fmt/core.h>

#include <algorithm>
#include <cctype>
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
#include "store/run_table.h"

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

// Each column's key in the runs table's order (store/run_table.h), as the dashboard's are.
constexpr const char* kSortKeys[] = {"status", "name",      "tags",       "layout",     "device",    "last_step",
                                     "loss",   "tokens_per_s", "mfu", "started_at", "duration_s"};

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

// A row of the screen: a run's line, or a group's header when grouped.
struct Item {
  size_t line = 0;
  std::optional<store::RunGroup> group;
};

class RunsScreen final : public Screen {
 public:
  explicit RunsScreen(LaunchSetup launch) : launch_(std::move(launch)) {}

  // Every run's line, in one pass of the store (store/run_table.h); the figures of the rows
  // drawn are read as they come into view.
  void load(Session& session) override {
    store::RunFilter filter;
    filter.config = where_;  // the store answers config matches; the regex is matched here
    store::RunOrder order;
    order.sort = kSortKeys[sort_];
    order.descending = descending_;
    order.group = group_;
    try {
      lines_ = store::read_run_lines(session.reader(), filter, order, store::unix_now());
    } catch (const Error& e) {
      session.flash(e.what(), Tone::Bad);
      group_.clear();
      return;
    }
    loaded_ = lines_.size();
    std::erase_if(lines_, [&](const store::RunLine& line) { return !matches(line.overview); });
    store::order_run_lines(lines_, order);
    completed_.assign(lines_.size(), false);
    arrange();
  }

  void draw(Session& session, int height) override {
    const Theme& theme = session.theme();
    fill_row(0, 0, COLS, theme.attr(Tone::Title));
    // The store's path last: on a narrow terminal it is what gets cut, not the state.
    std::string title = fmt::format(" kiln · {} {}", loaded_, group_ == store::kGroupByTag ? "rows" : "runs");
    if (lines_.size() != loaded_) title += fmt::format(" ({} shown)", lines_.size());
    if (!filter_.empty()) title += " · filter /" + filter_ + "/";
    if (!group_.empty()) title += " · by " + group_;
    title += fmt::format(" · sort {} {}", columns()[static_cast<size_t>(sort_)].header,
                         descending_ ? "desc" : "asc");
    if (!marked_.empty()) title += fmt::format(" · {} marked", marked_.size());
    title += " · " + session.store_path();
    put(0, 0, title, COLS, theme.attr(Tone::Title));
    if (items_.empty()) {
      if (!filter_.empty()) {
        put(3, 2, "No run matches /" + filter_ + "/ (/ and Enter clears the filter)", COLS - 4, 0);
        return;
      }
      put(2, 2, "No runs in " + session.store_path() + " yet.", COLS - 4, A_BOLD);
      put(3, 2, "Press n to launch one, or record one with `kiln train --store " +
                    session.store_path() + "`.", COLS - 4, 0);
      return;
    }
    // Only the rows in view are read and drawn (10,000 runs cost a screenful); the columns
    // fit them, so a column may widen as rows with longer cells come into view.
    visible_ = static_cast<size_t>(std::max(1, height - 2));
    first_ = scroll_to_show(first_, selected_, visible_);
    const size_t last = std::min(items_.size(), first_ + visible_);
    std::vector<std::vector<TableCell>> rows;
    std::vector<bool> marked;
    for (size_t k = first_; k < last; ++k) {
      if (items_[k].group) {
        const store::RunGroup& g = *items_[k].group;
        std::vector<TableCell> header(columns().size(), TableCell{});
        header[kStatus] = {group_ == store::kGroupByTag ? "tag" : group_ + " =", Tone::Dim};
        header[kName] = {fmt::format("{} · {} run{}", g.label, g.runs, g.runs == 1 ? "" : "s"), Tone::Accent};
        rows.push_back(std::move(header));
        marked.push_back(false);
        continue;
      }
      const size_t i = items_[k].line;
      if (!completed_[i]) {
        store::complete_line(session.reader(), lines_[i], store::unix_now());
        completed_[i] = true;
      }
      rows.push_back(cells(lines_[i].overview));
      marked.push_back(marked_.count(lines_[i].overview.run.id) > 0);
    }
    TableView view{1, 0, COLS, height - 1, 0, static_cast<long>(selected_ - first_), true};
    draw_table(view, columns(), rows, marked, theme);
  }

  Outcome key(int key, Session& session) override {
    if (prompt_) return prompt_key(key, session);
    if (move_selection(key, items_.size(), visible_, selected_)) {
      remember_selection();
      return Outcome::handled();
    }
    const store::RunRecord* run = selected_run();
    switch (key) {
      case '\n': case '\r': case KEY_ENTER:
        if (!run) return Outcome::handled();
        return Outcome::push(make_run_screen(run->id));
      case ' ':
        if (!run) return Outcome::handled();
        if (!marked_.erase(run->id)) marked_.insert(run->id);
        selected_ = std::min(selected_ + 1, items_.size() - 1);
        remember_selection();
        return Outcome::handled();
      case '/':
        prompt_.emplace(Prompt::Kind::Text, "filter (regex on name, tags, status, device; KEY=VALUE words: config):",
                        filter_);
        prompt_for_ = PromptFor::Filter;
        return Outcome::handled();
      case 'b':
        prompt_.emplace(Prompt::Kind::Text, "group by (tag, or a config key such as train.lr; empty: none):", group_);
        prompt_for_ = PromptFor::Group;
        return Outcome::handled();
      case '<': case KEY_LEFT: sort_ = (sort_ + kDuration) % (kDuration + 1); load(session); return Outcome::handled();
      case '>': case KEY_RIGHT: sort_ = (sort_ + 1) % (kDuration + 1); load(session); return Outcome::handled();
      case 'r': descending_ = !descending_; load(session); return Outcome::handled();
      case 'n': return Outcome::push(make_launch_form(launch_));
      case 'c': {
        if (marked_.size() < 2) {
          session.flash("mark two or more runs with Space, then c compares them", Tone::Warn);
          return Outcome::handled();
        }
        // In the table's order, once each (grouped by tag, a run may be on two rows).
        std::vector<int64_t> ids;
        for (const store::RunLine& line : lines_)
          if (const int64_t id = line.overview.run.id; marked_.count(id) && std::find(ids.begin(), ids.end(), id) == ids.end())
            ids.push_back(id);
        return Outcome::push(make_compare_screen(ids));
      }
      case 'S': {
        if (!run) return Outcome::handled();
        if (!run->sweep_id) {
          session.flash("run " + run->name + " is not part of a sweep", Tone::Warn);
          return Outcome::handled();
        }
        return Outcome::push(make_sweep_screen(*run->sweep_id));
      }
      default: return Outcome::ignored();
    }
  }

  std::vector<KeyHint> hints() const override {
    return {{"Enter", "Open"}, {"Space", "Mark"}, {"c", "Compare"}, {"n", "New"},
            {"/", "Filter"}, {"b", "Group"}, {"<>", "Sort"}, {"?", "Help"}, {"q", "Quit"}};
  }

  std::vector<KeyHint> help() const override {
    return {{"Enter", "open the selected run"},
            {"Space", "mark / unmark the run for comparison"},
            {"c", "compare the marked runs"},
            {"S", "open the sweep the selected run is a point of"},
            {"n", "launch a new run (the launch form)"},
            {"/", "filter by a regex and config KEY=VALUE words (empty clears it)"},
            {"b", "group by tag or a config key (empty: no groups)"},
            {"< > Left Right", "sort by the previous / next column"},
            {"r", "reverse the sort"}};
  }

  std::string title() const override { return "Runs"; }
  const Prompt* prompt() const override { return prompt_ ? &*prompt_ : nullptr; }

 private:
  enum class PromptFor { Filter, Group };

  Outcome prompt_key(int key, Session& session) {
    const Prompt::Result result = prompt_->key(key);
    if (result == Prompt::Result::Accepted && prompt_for_ == PromptFor::Group) {
      std::string typed = prompt_->text();
      std::erase_if(typed, [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
      group_ = typed;
      load(session);
    } else if (result == Prompt::Result::Accepted) {
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

  // The rows: the ordered lines, each group's header before its lines; the selected run
  // stays selected when it is still shown.
  void arrange() {
    items_.clear();
    const std::vector<store::RunGroup> groups = store::run_groups(lines_);
    size_t group = 0;
    for (size_t i = 0; i < lines_.size(); ++i) {
      if (group < groups.size() && (i == 0 || lines_[i].group != lines_[i - 1].group))
        items_.push_back({0, groups[group++]});
      items_.push_back({i, std::nullopt});
    }
    selected_ = 0;
    for (size_t k = 0; k < items_.size(); ++k)
      if (!items_[k].group && lines_[items_[k].line].overview.run.id == selected_id_) {
        selected_ = k;
        break;
      }
    remember_selection();
  }

  const store::RunRecord* selected_run() const {
    if (selected_ >= items_.size() || items_[selected_].group) return nullptr;
    return &lines_[items_[selected_].line].overview.run;
  }

  void remember_selection() {
    if (const store::RunRecord* run = selected_run()) selected_id_ = run->id;
  }

  LaunchSetup launch_;
  size_t loaded_ = 0;                  // the lines the store gave (config matches kept)
  std::vector<store::RunLine> lines_;  // those the regex keeps too, in order
  std::vector<bool> completed_;        // per line: its figures read (complete_line)
  std::vector<Item> items_;
  size_t selected_ = 0, first_ = 0, visible_ = 1;
  int64_t selected_id_ = 0;  // follows the run, not the row, as the table re-sorts
  std::set<int64_t> marked_;
  std::string filter_;                  // as typed
  std::string regex_;                   // its words that are not config matches
  std::vector<store::ConfigMatch> where_;  // its KEY=VALUE words
  std::regex pattern_;
  std::string group_;  // "", "tag" or a config key
  int sort_ = kStarted;
  bool descending_ = true;
  std::optional<Prompt> prompt_;
  PromptFor prompt_for_ = PromptFor::Filter;
};

}  // namespace

std::unique_ptr<Screen> make_runs_screen(LaunchSetup launch) {
  return std::make_unique<RunsScreen>(std::move(launch));
}

}  // namespace kiln::tui
