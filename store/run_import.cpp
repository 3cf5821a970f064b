#include "store/run_import.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include <fmt/core.h>

#include "base/check.h"
#include "store/metric_fields.h"

namespace kiln::store {

namespace {

// Other tools' names for kiln's metrics ("valid_loss": the run's validation loss).
struct Alias {
  std::string_view name, kiln;
};
constexpr Alias kAliases[] = {
    {"_step", "step"},          {"Step", "step"},
    {"global_step", "step"},    {"trainer/global_step", "step"},
    {"iteration", "step"},      {"_timestamp", "time"},
    {"timestamp", "time"},      {"Wall time", "time"},
    {"wall_time", "time"},      {"train/loss", "loss"},
    {"train_loss", "loss"},     {"training_loss", "loss"},
    {"learning_rate", "lr"},    {"train/learning_rate", "lr"},
    {"train/lr", "lr"},         {"train/grad_norm", "grad_norm"},
    {"gradient_norm", "grad_norm"}, {"tokens_per_second", "tokens_per_s"},
    {"train/tokens_per_second", "tokens_per_s"}, {"valid_loss", "valid_loss"},
    {"val_loss", "valid_loss"}, {"val/loss", "valid_loss"},
    {"eval/loss", "valid_loss"}, {"eval_loss", "valid_loss"},
    {"validation/loss", "valid_loss"}, {"valid/loss", "valid_loss"},
};

// Where a column's values go.
struct Target {
  enum Kind { Metric, Valid, Run, None } kind = None;
  const MetricField* field = nullptr;  // Metric
};

Target target_of(std::string_view name) {
  std::string_view kiln = name;
  for (const Alias& a : kAliases)
    if (a.name == name) kiln = a.kiln;
  if (kiln == "valid_loss") return {Target::Valid};
  if (kiln == "run") return {Target::Run};
  if (const MetricField* f = find_metric_field(kiln)) return {Target::Metric, f};
  return {};
}

std::optional<double> number(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\r')) text.remove_suffix(1);
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool empty_value(std::string_view text) {
  return text.empty() || text == "nan" || text == "NaN" || text == "null" || text == "None";
}

// The rows read so far, merged by (step, rank).
class Rows {
 public:
  // A step's values of one source line; `line` names it in an error.
  void put(int64_t line, std::optional<double> step, std::optional<double> rank, std::optional<double> time,
           const std::vector<std::pair<Target, double>>& values) {
    if (values.empty()) return;
    KILN_CHECK(step.has_value(), fmt::format("import: line {} has values but no step", line));
    KILN_CHECK(whole(*step) && *step >= 0, fmt::format("import: line {}: step {} is not a whole number >= 0", line, *step));
    KILN_CHECK(!rank || (whole(*rank) && *rank >= 0), fmt::format("import: line {}: rank {} is not a whole number >= 0", line, *rank));
    const int64_t s = static_cast<int64_t>(*step);
    // Milliseconds (MLflow's) read as the seconds they are: no run was logged 3,000 years on.
    const double seconds = time ? (*time > 1e11 ? *time / 1000 : *time) : 0.0;
    for (const auto& [target, value] : values) {
      if (target.kind == Target::Valid) {
        ValidRow& v = valid_[s];
        v.step = s;
        v.loss = value;
        if (time) v.time = seconds;
        continue;
      }
      MetricRow& row = metrics_[{s, rank ? static_cast<int>(*rank) : 0}];
      row.step = s;
      row.rank = rank ? static_cast<int>(*rank) : 0;
      if (time) row.time = seconds;
      set(row, *target.field, value, line);
      named_.insert(std::string(target.field->name));
    }
  }

  ImportedRows take(std::vector<std::string> skipped) {
    ImportedRows out;
    for (auto& [key, row] : metrics_) out.metrics.push_back(row);
    for (auto& [step, row] : valid_) out.valid.push_back(row);
    for (const MetricField& f : kMetricFields)
      if (named_.count(std::string(f.name))) out.metric_names.emplace_back(f.name);
    KILN_CHECK(!out.metrics.empty() || !out.valid.empty(),
               "import: no step holds a metric kiln keeps (loss, lr, grad_norm, ... or a validation loss)");
    out.skipped = std::move(skipped);
    return out;
  }

 private:
  static bool whole(double v) { return std::isfinite(v) && v == std::floor(v); }

  static void set(MetricRow& row, const MetricField& field, double value, int64_t line) {
    const auto integer = [&] {
      KILN_CHECK(whole(value), fmt::format("import: line {}: {} {} is not a whole number", line, field.name, value));
      return static_cast<int64_t>(value);
    };
    std::visit(
        [&](auto member) {
          using Member = std::remove_reference_t<decltype(row.*member)>;
          if constexpr (std::is_same_v<Member, double>) row.*member = value;
          else if constexpr (std::is_same_v<Member, int>) row.*member = static_cast<int>(integer());
          else row.*member = integer();
        },
        field.member);
  }

  std::map<std::pair<int64_t, int>, MetricRow> metrics_;
  std::map<int64_t, ValidRow> valid_;
  std::set<std::string> named_;
};

// One CSV record (RFC 4180: quoted fields may hold commas, quotes doubled and line breaks);
// false at the end of the input. `line` counts the input's lines.
bool read_record(std::istream& in, std::vector<std::string>& fields, int64_t& line) {
  fields.clear();
  std::string text;
  if (!std::getline(in, text)) return false;
  const int64_t first = ++line;
  std::string field;
  bool quoted = false;
  for (size_t i = 0;; ++i) {
    if (i == text.size()) {
      if (!quoted) break;
      std::string more;
      KILN_CHECK(static_cast<bool>(std::getline(in, more)), fmt::format("import: line {}: a quote is never closed", first));
      ++line;
      text += "\n" + more;
    }
    const char c = text[i];
    if (quoted && c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
      field += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      fields.push_back(std::move(field));
      field.clear();
    } else if (c != '\r' || quoted) {
      field += c;
    }
  }
  fields.push_back(std::move(field));
  return true;
}

int find_column(const std::vector<std::string>& header, std::initializer_list<std::string_view> candidates) {
  for (size_t i = 0; i < header.size(); ++i)
    for (std::string_view n : candidates)
      if (header[i] == n) return static_cast<int>(i);
  return -1;
}

std::optional<double> value_at(const std::vector<std::string>& fields, int column, int64_t line,
                               const std::string& name) {
  if (column < 0 || column >= static_cast<int>(fields.size()) || empty_value(fields[static_cast<size_t>(column)]))
    return std::nullopt;
  const std::optional<double> v = number(fields[static_cast<size_t>(column)]);
  KILN_CHECK(v.has_value(), fmt::format("import: line {}: '{}' in column {} is not a number", line,
                                        fields[static_cast<size_t>(column)], name));
  return v;
}

// The column goes to kiln's `field`.
bool names(const Target& t, std::string_view field) { return t.kind == Target::Metric && t.field->name == field; }

// Columns a step's row is keyed by rather than values of it.
bool is_key(const Target& t) { return names(t, "step") || names(t, "rank") || names(t, "time"); }

// The first column whose values go to kiln's `field` (by its name or an alias), or -1.
int column_of(const std::vector<Target>& targets, std::string_view field) {
  for (size_t i = 0; i < targets.size(); ++i)
    if (names(targets[i], field)) return static_cast<int>(i);
  return -1;
}

}  // namespace

ImportedRows read_import_csv(std::istream& in, const std::string& tensorboard_metric) {
  std::vector<std::string> header, fields;
  int64_t line = 0;
  KILN_CHECK(read_record(in, header, line), "import: the file is empty");
  std::vector<Target> targets;
  for (const std::string& name : header) targets.push_back(target_of(name));
  const int step = column_of(targets, "step"), rank = column_of(targets, "rank"), time = column_of(targets, "time");
  KILN_CHECK(step >= 0, "import: no step column (step, _step, Step, global_step, ...) in the header");
  const int key = find_column(header, {"key", "metric", "tag", "name"}), value = find_column(header, {"value", "Value"});
  const bool tensorboard = key < 0 && value >= 0 && header.size() <= 3;
  KILN_CHECK(tensorboard || tensorboard_metric.empty(),
             "import: --metric names the metric of a TensorBoard scalar CSV (Wall time, Step, Value), which this is not");
  KILN_CHECK(!tensorboard || !tensorboard_metric.empty(),
             "import: a TensorBoard scalar CSV holds one metric: name it with --metric (e.g. --metric loss)");
  Rows rows;
  std::vector<std::string> skipped;
  const auto skip = [&](const std::string& name) {
    if (std::find(skipped.begin(), skipped.end(), name) == skipped.end()) skipped.push_back(name);
  };
  if (key < 0 && !tensorboard)
    for (size_t c = 0; c < header.size(); ++c)
      if (targets[c].kind == Target::None) skip(header[c]);
  std::set<std::string> runs;
  while (read_record(in, fields, line)) {
    if (fields.size() == 1 && fields[0].empty()) continue;
    KILN_CHECK(fields.size() == header.size(), fmt::format("import: line {} has {} fields, the header {}", line,
                                                           fields.size(), header.size()));
    const auto at = [&](int c) { return value_at(fields, c, line, c >= 0 ? header[static_cast<size_t>(c)] : ""); };
    std::vector<std::pair<Target, double>> values;
    if (key >= 0 || tensorboard) {
      // Long: the row's metric is named in a column of its own (or, for TensorBoard, by --metric).
      const std::string name = tensorboard ? tensorboard_metric : fields[static_cast<size_t>(key)];
      const Target t = target_of(name);
      if (t.kind == Target::None || t.kind == Target::Run || is_key(t)) {
        skip(name);
      } else if (const std::optional<double> v = at(value)) {
        values.push_back({t, *v});
      }
    } else {
      for (size_t c = 0; c < header.size(); ++c) {
        const Target& t = targets[c];
        if (t.kind == Target::Run) {
          runs.insert(fields[c]);
          KILN_CHECK(runs.size() <= 1, fmt::format("import: line {} starts a second run ('{}'): import one run at a time",
                                                   line, fields[c]));
        }
        if (t.kind == Target::None || t.kind == Target::Run || is_key(t)) continue;
        if (const std::optional<double> v = at(static_cast<int>(c))) values.push_back({t, *v});
      }
    }
    rows.put(line, at(step), at(rank), at(time), values);
  }
  return rows.take(std::move(skipped));
}

ImportedRows read_import_jsonl(std::istream& in) {
  Rows rows;
  std::vector<std::string> skipped;
  int64_t line = 0;
  for (std::string text; std::getline(in, text);) {
    ++line;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json object = nlohmann::json::parse(text, nullptr, false);
    KILN_CHECK(object.is_object(), fmt::format("import: line {} is not a JSON object", line));
    std::optional<double> step, rank, time;
    std::vector<std::pair<Target, double>> values;
    for (const auto& [name, value] : object.items()) {
      const Target t = target_of(name);
      if (value.is_null()) continue;
      if (t.kind == Target::None || t.kind == Target::Run || !value.is_number()) {
        if (t.kind != Target::Run && std::find(skipped.begin(), skipped.end(), name) == skipped.end())
          skipped.push_back(name);
        continue;
      }
      const double v = value.get<double>();
      if (names(t, "step")) step = v;
      else if (names(t, "rank")) rank = v;
      else if (names(t, "time")) time = v;
      else if (std::isfinite(v)) values.push_back({t, v});
    }
    rows.put(line, step, rank, time, values);
  }
  return rows.take(std::move(skipped));
}

}  // namespace kiln::store
