#include "store/run_table.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <utility>

#include "store/alert_rows.h"
#include "store/error.h"
#include "store/run_figures.h"
#include "store/user_text.h"

namespace kiln::store {
namespace {

struct LatestMeans {
  double loss = kNoValue, tokens_per_s = kNoValue, mfu = kNoValue;
};

// Every run's means over the ranks at its latest logged step, in one query: the latest step
// is one seek of the metrics key per run, its rows a range of the same key. The runs come
// from the name's index (no pass over the runs table's wide rows), and CROSS JOIN keeps
// SQLite from walking every metric row instead (which it chose, and a store of one
// 4,096-rank run has millions).
std::map<int64_t, LatestMeans> latest_means(Database& db) {
  Statement& st = db.cached(R"sql(
    WITH latest(run_id, step) AS MATERIALIZED (
      SELECT id, (SELECT max(step) FROM metrics WHERE run_id = runs.id) FROM runs)
    SELECT latest.run_id, avg(m.loss), avg(m.tokens_per_s), avg(m.mfu)
    FROM latest CROSS JOIN metrics AS m ON m.run_id = latest.run_id AND m.step = latest.step
    GROUP BY latest.run_id)sql");
  std::map<int64_t, LatestMeans> means;
  while (st.step()) means[st.int64(0)] = {st.opt_real(1).value_or(kNoValue), st.opt_real(2).value_or(kNoValue),
                                          st.opt_real(3).value_or(kNoValue)};
  return means;
}

// Every run's value at a dotted config key, as JSON (null where the config lacks the key),
// its secrets hidden. SQLite reads the configs' text without handing it over.
std::map<int64_t, nlohmann::json> config_values(Database& db, const std::string& key) {
  Statement& st = db.cached("SELECT id, config_json -> ? FROM runs");
  st.bind(1, "$." + key);
  std::map<int64_t, nlohmann::json> values;
  while (st.step()) {
    if (st.is_null(1)) continue;
    nlohmann::json value = nlohmann::json::parse(st.text(1), nullptr, /*allow_exceptions=*/false);
    if (!value.is_discarded()) values[st.int64(0)] = redact_config_value(key, std::move(value));
  }
  return values;
}

// A value as a cell or a group's label shows it: text as it is, anything else as JSON.
std::string label_of(const nlohmann::json& value) {
  if (value.is_null()) return "—";
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// Absent values (null) last; numbers as numbers; anything else by its label.
int compare_values(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_null() || b.is_null()) return static_cast<int>(a.is_null()) - static_cast<int>(b.is_null());
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    return (x > y) - (x < y);
  }
  if (a.is_string() && b.is_string()) return a.get_ref<const std::string&>().compare(b.get_ref<const std::string&>());
  return label_of(a).compare(label_of(b));
}

std::string config_key_of_sort(const std::string& sort) {
  return sort.starts_with(kConfigSortPrefix) ? sort.substr(kConfigSortPrefix.size()) : "";
}

// A line's value in a built-in column: a number (NaN: absent) or text (empty: absent).
struct Cell {
  double number = kNoValue;
  std::string text;
  bool is_text = false;
  bool present() const { return is_text ? !text.empty() : !std::isnan(number); }
};

Cell number(double value) { return Cell{value, {}, false}; }
Cell text(std::string value) { return Cell{kNoValue, std::move(value), true}; }

Cell cell_of(const RunLine& line, std::string_view column) {
  const RunOverview& o = line.overview;
  const RunRecord& run = o.run;
  if (column == "status") return text(std::string(to_string(run.status)));
  if (column == "name") return text(run.name);
  if (column == "tags") {
    std::string tags;
    for (const std::string& tag : run.tags) tags += (tags.empty() ? "" : ",") + tag;
    return text(tags);
  }
  if (column == "layout") return text(run.layout);
  if (column == "device") return text(run.device);
  if (column == "store") return number(static_cast<double>(line.source));
  if (column == "last_step") return number(run.last_step ? static_cast<double>(*run.last_step) : kNoValue);
  if (column == "loss") return number(o.loss);
  if (column == "tokens_per_s") return number(o.tokens_per_s);
  if (column == "mfu") return number(o.mfu);
  if (column == "duration_s") return number(o.duration_s);
  return number(run.started_at.value_or(run.created_at));  // started_at
}

// Compares two lines in the sort column, ascending; 0 for equals. Absent values are the
// caller's (they go last whichever the direction).
int compare_present(const Cell& a, const Cell& b) {
  if (a.is_text) return a.text.compare(b.text);
  return (a.number > b.number) - (a.number < b.number);
}

}  // namespace

void check_order(const RunOrder& order) {
  const std::string key = config_key_of_sort(order.sort);
  const bool column = std::find(std::begin(kRunSortKeys), std::end(kRunSortKeys), order.sort) != std::end(kRunSortKeys);
  if (!column && key.empty()) {
    std::string choices;
    for (const std::string_view k : kRunSortKeys) choices += std::string(choices.empty() ? "" : ", ") + std::string(k);
    fail("runs: cannot sort by '" + order.sort + "': sort by one of " + choices + ", or config:KEY");
  }
  if (!key.empty()) parse_config_match(key + "=");
  if (!order.group.empty() && order.group != kGroupByTag) parse_config_match(order.group + "=");
}

std::vector<RunLine> read_run_lines(Database& db, const RunFilter& filter, const RunOrder& order, double now_s,
                                    size_t source) {
  check_order(order);
  RunFilter light = filter;
  light.with_config = false;
  light.limit = 0;
  // One snapshot, so that the runs, their means and their alerts agree.
  const ReadSnapshot snapshot(db);
  // The means of every run only to sort by one of them; otherwise complete_line reads the
  // page's (a pass over every run's latest rows costs about as much as the rest together).
  const bool by_means = order.sort == "loss" || order.sort == "tokens_per_s" || order.sort == "mfu";
  const std::map<int64_t, LatestMeans> means = by_means ? latest_means(db) : decltype(means){};
  const std::map<int64_t, int64_t> alerts = alert_counts(db);
  const std::string sort_key = config_key_of_sort(order.sort);
  const std::map<int64_t, nlohmann::json> sort_values = sort_key.empty() ? decltype(sort_values){} : config_values(db, sort_key);
  const bool by_tag = order.group == kGroupByTag;
  const std::map<int64_t, nlohmann::json> group_values =
      order.group.empty() || by_tag ? decltype(group_values){} : config_values(db, order.group);
  std::vector<RunRecord> runs = list_runs(db, light);
  std::vector<RunLine> lines;
  lines.reserve(runs.size());  // a line is large: growing the vector would move each several times
  for (RunRecord& run : runs) {
    RunLine line;
    line.source = source;
    const auto value_in = [&](const std::map<int64_t, nlohmann::json>& values) {
      const auto found = values.find(run.id);
      return found == values.end() ? nlohmann::json() : found->second;
    };
    line.sort_value = value_in(sort_values);
    line.overview.duration_s = run_duration_s(run, now_s);
    if (const auto m = means.find(run.id); m != means.end()) {
      line.overview.loss = m->second.loss;
      line.overview.tokens_per_s = m->second.tokens_per_s;
      line.overview.mfu = m->second.mfu;
    }
    if (const auto a = alerts.find(run.id); a != alerts.end()) line.alerts = a->second;
    const std::vector<std::string> tags = run.tags;
    line.overview.run = std::move(run);
    if (by_tag) {
      // A run with several tags is in each tag's group, as a row of each.
      for (const std::string& tag : tags) {
        RunLine tagged = line;
        tagged.group_value = tag;
        tagged.group = tag;
        lines.push_back(std::move(tagged));
      }
      if (tags.empty()) {
        line.group = kNoTagsGroup;
        lines.push_back(std::move(line));
      }
    } else {
      if (!order.group.empty()) {
        line.group_value = value_in(group_values);
        line.group = label_of(line.group_value);
      }
      lines.push_back(std::move(line));
    }
  }
  return lines;
}

void order_run_lines(std::vector<RunLine>& lines, const RunOrder& order) {
  const bool by_config = !config_key_of_sort(order.sort).empty();
  // Each line's cell once, not once per comparison.
  std::vector<Cell> cells(by_config ? 0 : lines.size());
  for (size_t i = 0; i < cells.size(); ++i) cells[i] = cell_of(lines[i], order.sort);
  std::vector<size_t> at(lines.size());
  std::iota(at.begin(), at.end(), size_t{0});
  std::stable_sort(at.begin(), at.end(), [&](size_t i, size_t j) {
    const RunLine& a = lines[i];
    const RunLine& b = lines[j];
    if (!order.group.empty()) {
      if (const int g = compare_values(a.group_value, b.group_value); g != 0) return g < 0;
    }
    int c = 0;
    if (by_config) {
      if (a.sort_value.is_null() || b.sort_value.is_null()) return !a.sort_value.is_null() && b.sort_value.is_null();
      c = compare_values(a.sort_value, b.sort_value);
    } else {
      if (!cells[i].present() || !cells[j].present()) return cells[i].present() && !cells[j].present();
      c = compare_present(cells[i], cells[j]);
    }
    return order.descending ? c > 0 : c < 0;
  });
  std::vector<RunLine> sorted;
  sorted.reserve(lines.size());
  for (const size_t i : at) sorted.push_back(std::move(lines[i]));
  lines = std::move(sorted);
}

std::vector<RunGroup> run_groups(std::span<const RunLine> ordered) {
  std::vector<RunGroup> groups;
  for (const RunLine& line : ordered) {
    if (line.group.empty()) continue;
    if (groups.empty() || groups.back().label != line.group) groups.push_back({line.group, 0});
    ++groups.back().runs;
  }
  return groups;
}

void complete_line(Database& db, RunLine& line, double now_s) {
  RunRecord run = std::move(line.overview.run);
  Statement& st = db.cached("SELECT config_json FROM runs WHERE id = ?");
  st.bind_all(run.id);
  if (st.step()) run.config_json = st.text(0);
  st.reset();
  line.overview = run_overview(db, std::move(run), now_s);
  if (line.alerts > 0)
    for (const Alert& a : list_alerts(db, line.overview.run.id, 1)) line.latest_alert = a.rule + ": " + a.message;
}

std::vector<std::string> recent_config_keys(Database& db, size_t runs, size_t most) {
  Statement& st = db.cached("SELECT config_json FROM runs ORDER BY id DESC LIMIT ?");
  st.bind_all(static_cast<int64_t>(runs));
  std::set<std::string> keys;
  const auto flatten = [&](const auto& self, const nlohmann::json& value, const std::string& prefix) -> void {
    for (const auto& [key, item] : value.items()) {
      const std::string path = prefix.empty() ? key : prefix + "." + key;
      if (item.is_object()) self(self, item, path);
      else keys.insert(path);
    }
  };
  while (st.step()) {
    const nlohmann::json config = nlohmann::json::parse(st.text(0), nullptr, /*allow_exceptions=*/false);
    if (config.is_object()) flatten(flatten, config, "");
  }
  std::vector<std::string> sorted(keys.begin(), keys.end());
  if (sorted.size() > most) sorted.resize(most);
  return sorted;
}

}  // namespace kiln::store
