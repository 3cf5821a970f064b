// The runs table over thousands of runs (GET /api/runs and the dashboard's runs page, the
// TUI's runs screen): a few queries over the whole store read every matching run's line (its
// record without the config's text, its alert count, and its latest step's means over the
// ranks when sorting by one), the lines are sorted, grouped and cut to a page in memory
// (10,000 lines are a few MB), and only the page's runs then read their config, planned
// steps, means and latest alert.
// Reading each run's overview one by one (run_overview.h) took a second at 10,000 runs
// (bench/README.md, "Store and dashboard at scale").
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "store/database.h"
#include "store/run_overview.h"
#include "store/run_queries.h"

namespace kiln::store {

// The columns a runs table sorts by, as the dashboard's and the TUI's columns name them;
// "config:KEY" sorts by a config key's value. "store" orders by RunLine::source.
inline constexpr std::string_view kRunSortKeys[] = {"status",  "name",      "store",  "tags",
                                                    "layout",  "device",    "last_step", "loss",
                                                    "tokens_per_s", "mfu",  "started_at", "duration_s"};
inline constexpr std::string_view kConfigSortPrefix = "config:";
inline constexpr std::string_view kGroupByTag = "tag";
// The group of a run without tags, when grouped by tag (it comes last).
inline constexpr std::string_view kNoTagsGroup = "(no tags)";

struct RunOrder {
  std::string sort = "started_at";  // a kRunSortKeys key or config:KEY
  bool descending = true;
  std::string group;  // "": none; "tag": a group per tag (a run with two tags is in both); or a config key
};

// Refuses a sort key that is neither a column nor config:KEY, or a group that is neither "",
// "tag" nor a dotted config key, with a one-line error naming the choices.
void check_order(const RunOrder& order);

struct RunLine {
  // Its config, planned steps and (unless sorted by one) means are empty until complete_line.
  RunOverview overview;
  int64_t alerts = 0;
  std::string latest_alert;    // "rule: message" of the newest alert, from complete_line
  nlohmann::json sort_value;   // the config value sorted by (config:KEY), its secrets hidden
  nlohmann::json group_value;  // the value grouped by (a config value, or the tag)
  std::string group;           // its group's label; empty when not grouped
  size_t source = 0;           // which store it came from, for a server of several
};

// Every run that `filter` keeps (its limit and with_config are not used), one line each, or
// one per tag when grouped by tag; newest first. `source` goes into each line.
std::vector<RunLine> read_run_lines(Database& db, const RunFilter& filter, const RunOrder& order,
                                    double now_s, size_t source = 0);

// Sorts lines by group (by the values grouped by: numbers as numbers, absent last), then by
// the sort column within a group (absent values last in either direction); equal lines keep
// the order they came in.
void order_run_lines(std::vector<RunLine>& lines, const RunOrder& order);

struct RunGroup {
  std::string label;
  size_t runs = 0;
};
// The groups of ordered lines, in their order; empty when not grouped.
std::vector<RunGroup> run_groups(std::span<const RunLine> ordered);

// Reads what a line leaves out, for the runs shown: the config, then the run's overview
// (run_overview.h: planned steps, the latest step's means, the duration at now_s), and the
// latest alert.
void complete_line(Database& db, RunLine& line, double now_s);

// The dotted config keys (lists as one value, as the tables show them) of the newest `runs`
// runs, sorted, at most `most`: the choices of a runs table's filter, group and column menus.
// Runs of one kiln version record every key, so the newest few hundred hold the store's keys.
std::vector<std::string> recent_config_keys(Database& db, size_t runs, size_t most);

}  // namespace kiln::store
