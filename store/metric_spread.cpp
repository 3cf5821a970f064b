#include "store/metric_spread.h"

#include <algorithm>
#include <cmath>

#include "store/error.h"
#include "store/metric_blocks.h"
#include "store/metric_fields.h"
#include "store/metric_queries.h"
#include "store/rows.h"
#include "store/spread_blocks.h"
#include "store/spread_columns.h"

namespace kiln::store {
namespace {

using Fields = std::span<const MetricField* const>;

std::string field_names(Fields fields) {
  std::string out;
  for (const MetricField* f : fields) out += ", " + std::string(f->name);
  return out;
}

StepSpread empty_spread(int64_t step, Fields fields) {
  StepSpread s;
  s.step = step;
  s.fields.resize(fields.size());
  return s;
}

void add_row(StepSpread& s, int rank, double time, const std::vector<double>& values) {
  s.time = std::max(s.time, time);
  ++s.ranks;
  s.top_rank = std::max(s.top_rank, rank);
  for (size_t k = 0; k < values.size(); ++k)
    if (!std::isnan(values[k])) s.fields[k].add(rank, values[k]);
}

void insert_spread(Database& db, int64_t run_id, const StepSpread& s, Fields fields) {
  Statement& st = db.cached("INSERT OR REPLACE INTO metric_spread (run_id, step, time, ranks, top_rank, " +
                            spread_column_list(fields) + ") VALUES (?, ?, ?, ?, ?" + spread_placeholders(fields) + ")");
  st.bind_all(run_id, s.step, s.time, s.ranks, int64_t{s.top_rank});
  bind_spreads(st, 6, s.fields);
  st.run();
}

// The step's spread as stored, or nullopt.
std::optional<StepSpread> stored_spread(Database& db, int64_t run_id, int64_t step) {
  static const std::string sql = "SELECT time, ranks, top_rank, " + spread_column_list(spread_fields()) +
                                 " FROM metric_spread WHERE run_id = ? AND step = ?";
  Statement& st = db.cached(sql);
  st.bind_all(run_id, step);
  std::optional<StepSpread> s;
  if (st.step()) {
    s = empty_spread(step, spread_fields());
    s->time = st.real(0);
    s->ranks = st.int64(1);
    s->top_rank = static_cast<int>(st.int64(2));
    s->fields = read_spreads(st, 3, spread_fields().size());
  }
  st.reset();
  return s;
}

// The step's spread from its rows, as they are now.
StepSpread spread_of_rows(Database& db, int64_t run_id, int64_t step) {
  static const std::string sql = "SELECT rank, time" + field_names(spread_fields()) +
                                 " FROM metrics WHERE run_id = ? AND step = ? ORDER BY rank";
  Statement& st = db.cached(sql);
  st.bind_all(run_id, step);
  StepSpread s = empty_spread(step, spread_fields());
  std::vector<double> values(spread_fields().size());
  while (st.step()) {
    for (size_t k = 0; k < values.size(); ++k) values[k] = st.real(static_cast<int>(k) + 2);  // NULL: NaN
    add_row(s, static_cast<int>(st.int64(0)), st.real(1), values);
  }
  return s;
}

int64_t stored_row_count(Database& db, int64_t run_id, int64_t step) {
  Statement& st = db.cached("SELECT count(*) FROM metrics WHERE run_id = ? AND step = ?");
  st.bind_all(run_id, step);
  st.step();
  const int64_t rows = st.int64(0);
  st.reset();
  return rows;
}

void delete_spread(Database& db, int64_t run_id, int64_t step) {
  Statement& st = db.cached("DELETE FROM metric_spread WHERE run_id = ? AND step = ?");
  st.bind_all(run_id, step);
  st.run();
}

// Deletes the rows of ranks other than 0 in [from, before).
void prune(Database& db, int64_t run_id, int64_t from, int64_t before) {
  Statement& st = db.cached("DELETE FROM metrics WHERE run_id = ? AND step >= ? AND step < ? AND rank <> 0");
  st.bind_all(run_id, from, before);
  st.run();
}

bool is_wide(int64_t ranks) { return ranks > static_cast<int64_t>(kSpreadAbove); }

// Calls visit with the field's spread at each wide step in [first, last], in step order.
template <class Visit>
void for_each_spread_step(Database& db, int64_t run_id, const MetricField& field, int64_t first, int64_t last,
                          const Visit& visit) {
  const MetricField* const one[] = {&field};
  Statement& st = db.cached("SELECT step, time, ranks, " + spread_column_list(one) +
                            " FROM metric_spread WHERE run_id = ? AND step BETWEEN ? AND ? ORDER BY step");
  st.bind_all(run_id, first, last);
  while (st.step()) visit(SpreadPart{st.int64(0), st.real(1), st.int64(2), read_spread(st, 3)});
}

// A series' points from its parts in order (steps, or blocks: the units): a bucket holds
// per_bucket units from `origin`, and its point merges its parts' spreads in order, so a tie
// keeps the earlier part's rank, at its last part's step, time and rank count. A bucket whose
// parts hold no value of the field has no point.
class SpreadBuckets {
 public:
  SpreadBuckets(int64_t origin, uint64_t per_bucket, SlowEnd slow)
      : origin_(origin), per_bucket_(per_bucket), slow_low_(slow == SlowEnd::Low) {}

  void add(int64_t unit, const SpreadPart& part) {
    const uint64_t bucket = (static_cast<uint64_t>(unit) - static_cast<uint64_t>(origin_)) / per_bucket_;
    if (bucket != bucket_) {
      close();
      across_ = FieldSpread{};
      bucket_ = bucket;
    }
    across_.merge(part.spread);
    last_ = part;
  }

  std::vector<SpreadPoint> finish() {
    close();
    return std::move(points_);
  }

 private:
  void close() {
    if (!across_.present()) return;
    points_.push_back(SpreadPoint{last_.step, last_.time, last_.ranks, across_.min,
                                  across_.sum / static_cast<double>(across_.count), across_.max,
                                  slow_low_ ? across_.min_rank : across_.max_rank,
                                  slow_low_ ? across_.min : across_.max});
  }

  int64_t origin_;
  uint64_t per_bucket_;
  bool slow_low_;
  uint64_t bucket_ = 0;
  FieldSpread across_;  // the open bucket's
  SpreadPart last_;
  std::vector<SpreadPoint> points_;
};

}  // namespace

void FieldSpread::add(int rank, double value) {
  if (!present() || value < min) {
    min = value;
    min_rank = rank;
  }
  if (!present() || value > max) {
    max = value;
    max_rank = rank;
  }
  sum += value;
  ++count;
}

void FieldSpread::merge(const FieldSpread& later) {
  if (!later.present()) return;
  if (!present()) {
    *this = later;
    return;
  }
  if (later.min < min) {
    min = later.min;
    min_rank = later.min_rank;
  }
  if (later.max > max) {
    max = later.max;
    max_rank = later.max_rank;
  }
  sum += later.sum;
  count += later.count;
}

void StepSpread::add(const MetricRow& row) {
  const Fields all = spread_fields();
  if (fields.size() != all.size()) fields.resize(all.size());
  std::vector<double> values(all.size());
  for (size_t k = 0; k < all.size(); ++k) values[k] = metric_value(row, *all[k]);
  add_row(*this, row.rank, row.time, values);
}

void SpreadUpdate::add(std::span<const MetricRow> rows) {
  for (const MetricRow& row : rows) {
    auto [it, fresh] = pending_.try_emplace(row.step);
    Pending& p = it->second;
    if (fresh) {
      p.spread = empty_spread(row.step, spread_fields());
      p.lowest_rank = row.rank;
    } else {
      p.ordered = p.ordered && row.rank > p.spread.top_rank;
    }
    p.spread.add(row);
  }
}

void SpreadUpdate::write(Database& db, int64_t run_id) {
  if (pending_.empty()) return;
  const std::optional<int64_t> window_before = pruned_before(db, run_id);
  SpreadBlockUpdate blocks;
  for (auto& [step, p] : pending_) {
    std::optional<StepSpread> stored = stored_spread(db, run_id, step);
    if (stored && p.ordered && p.lowest_rank > stored->top_rank) {
      // Ranks the stored spread has not counted: merge.
      for (size_t k = 0; k < stored->fields.size(); ++k) stored->fields[k].merge(p.spread.fields[k]);
      stored->time = std::max(stored->time, p.spread.time);
      stored->ranks += p.spread.ranks;
      stored->top_rank = p.spread.top_rank;
      insert_spread(db, run_id, *stored, spread_fields());
      blocks.changed(step);
      continue;
    }
    // Without a stored spread the batch usually holds the step's every row (the trainer's
    // gather hands them over together); when the table holds others, count them all.
    const StepSpread spread = !stored && p.ordered && stored_row_count(db, run_id, step) == p.spread.ranks
                                  ? std::move(p.spread)
                                  : spread_of_rows(db, run_id, step);
    if (is_wide(spread.ranks)) {
      insert_spread(db, run_id, spread, spread_fields());
      if (stored) blocks.changed(step);
      else blocks.added(spread);
    } else if (stored) {
      delete_spread(db, run_id, step);
      blocks.changed(step);
    }
  }
  blocks.write(db, run_id);
  // The window moved up by the new wide steps; steps this batch logged below it (a resumed
  // run logging old steps again) go too.
  if (const std::optional<int64_t> window = pruned_before(db, run_id)) {
    const int64_t from = window_before ? std::min(*window_before, pending_.begin()->first)
                                       : std::numeric_limits<int64_t>::min();
    prune(db, run_id, from, *window);
  }
  pending_.clear();
}

void build_spreads(Database& db) {
  // The fields whose columns existed then: a later field's come with its own version.
  const std::vector<const MetricField*> fields = spread_fields_at(kSpreadSince);
  // One walk of the metrics table in its key's order: a step's rows are consecutive.
  Statement walk(db, "SELECT run_id, step, rank, time" + field_names(fields) +
                         " FROM metrics ORDER BY run_id, step, rank");
  std::vector<int64_t> runs;
  std::optional<int64_t> run;
  StepSpread spread;
  const auto close = [&] {
    if (run && is_wide(spread.ranks)) {
      insert_spread(db, *run, spread, fields);
      if (runs.empty() || runs.back() != *run) runs.push_back(*run);
    }
  };
  std::vector<double> values(fields.size());
  while (walk.step()) {
    const int64_t run_id = walk.int64(0), step = walk.int64(1);
    if (run != run_id || spread.step != step) {
      close();
      run = run_id;
      spread = empty_spread(step, fields);
    }
    for (size_t k = 0; k < values.size(); ++k) values[k] = walk.real(static_cast<int>(k) + 4);
    add_row(spread, static_cast<int>(walk.int64(2)), walk.real(3), values);
  }
  close();
  for (const int64_t id : runs)
    if (const auto window = pruned_before(db, id)) prune(db, id, std::numeric_limits<int64_t>::min(), *window);
}

std::optional<int64_t> pruned_before(Database& db, int64_t run_id) {
  Statement& st = db.cached("SELECT step FROM metric_spread WHERE run_id = ? ORDER BY step DESC LIMIT 2 OFFSET ?");
  st.bind_all(run_id, kRecentSteps - 1);
  std::optional<int64_t> first;
  if (st.step()) {
    first = st.int64(0);
    if (!st.step()) first.reset();  // no wide step before the window: nothing pruned
  }
  st.reset();
  return first;
}

bool has_spread(Database& db, int64_t run_id) {
  Statement& st = db.cached("SELECT 1 FROM metric_spread WHERE run_id = ? LIMIT 1");
  st.bind_all(run_id);
  const bool any = st.step();
  st.reset();
  return any;
}

size_t for_each_row_beside_spread(Database& db, int64_t run_id, const std::function<void(const MetricRow&)>& visit,
                                  int64_t first_step, int64_t last_step) {
  std::vector<int64_t> wide;
  Statement& steps = db.cached("SELECT step FROM metric_spread WHERE run_id = ? AND step BETWEEN ? AND ? ORDER BY step");
  steps.bind_all(run_id, first_step, last_step);
  while (steps.step()) wide.push_back(steps.int64(0));
  steps.reset();
  // The narrow steps between the wide ones are ranges of the primary key; a wide step's rank 0
  // is one seek into it, where a filter on its rows would walk all of them.
  static const std::string sql = "SELECT " + metric_column_list() + " FROM metrics WHERE run_id = ? AND step = ? AND rank = 0";
  int64_t from = first_step;
  for (const int64_t step : wide) {
    if (step > from) for_each_metric(db, run_id, visit, from, step - 1);
    Statement& rank0 = db.cached(sql);
    rank0.bind_all(run_id, step);
    std::optional<MetricRow> row;
    if (rank0.step()) row = read_metric(rank0);
    rank0.reset();  // before `visit`, which may run other queries on this connection
    if (row) visit(*row);
    from = step + 1;
  }
  if (wide.empty() || wide.back() < last_step) for_each_metric(db, run_id, visit, from, last_step);
  return wide.size();
}

int64_t wide_step_ranks(Database& db, int64_t run_id, int64_t step) {
  Statement& st = db.cached("SELECT ranks FROM metric_spread WHERE run_id = ? AND step = ?");
  st.bind_all(run_id, step);
  const int64_t ranks = st.step() ? st.int64(0) : 0;
  st.reset();
  return ranks;
}

std::vector<SpreadPoint> spread_series(Database& db, int64_t run_id, const std::string& key,
                                       int64_t first_step, int64_t last_step, size_t max_points, size_t max_rows) {
  const MetricField* field = find_metric_field(key);
  const Fields all = spread_fields();
  if (!field || std::find(all.begin(), all.end(), field) == all.end())
    fail("store: '" + key + "' has no spread across ranks (it is not a per-rank metric)");
  ReadSnapshot snapshot(db);  // the range, the blocks and the rows from the same commits
  // The bucket width from the range present: its first and last wide steps, a seek each (one
  // statement with both min() and max() would walk the range).
  const auto edge = [&](bool highest) {
    Statement& st = db.cached(highest ? "SELECT max(step) FROM metric_spread WHERE run_id = ? AND step BETWEEN ? AND ?"
                                      : "SELECT min(step) FROM metric_spread WHERE run_id = ? AND step BETWEEN ? AND ?");
    st.bind_all(run_id, first_step, last_step);
    st.step();
    const std::optional<int64_t> step = st.opt_int64(0);
    st.reset();
    return step;
  };
  const std::optional<int64_t> lowest = edge(false);
  if (!lowest) return {};
  const int64_t first = *lowest, last = *edge(true);
  const uint64_t span = static_cast<uint64_t>(last) - static_cast<uint64_t>(first);
  const uint64_t width = max_points == 0 || span < max_points ? 1 : span / max_points + 1;
  if (width < static_cast<uint64_t>(kStepsPerBlock) && (max_rows == 0 || span + 1 <= max_rows)) {
    SpreadBuckets buckets(first, width, field->slow);
    for_each_spread_step(db, run_id, *field, first, last,
                         [&](const SpreadPart& part) { buckets.add(part.step, part); });
    return buckets.finish();
  }

  // Buckets of whole blocks, as many a bucket as keep the count within max_points. A block the
  // range cuts also counts steps outside it: the (at most two) cut ones come from their rows.
  const int64_t head = block_of(first), tail = block_of(last);
  const bool cut_head = first_step > first_step_of(head);
  // One block cut at both ends is read as the head.
  const bool cut_tail = last_step < last_step_of(tail) && !(cut_head && head == tail);
  const uint64_t blocks = static_cast<uint64_t>(tail) - static_cast<uint64_t>(head) + 1;
  SpreadBuckets buckets(head, blocks / max_points + (blocks % max_points != 0 ? 1 : 0), field->slow);
  const auto rows_as_block = [&](int64_t block, int64_t from, int64_t to) {
    for_each_spread_step(db, run_id, *field, from, to, [&](const SpreadPart& part) { buckets.add(block, part); });
  };
  if (cut_head) rows_as_block(head, first, std::min(last_step_of(head), last));
  const int64_t first_whole = head + (cut_head ? 1 : 0), last_whole = tail - (cut_tail ? 1 : 0);
  for (const FieldBlock& b : read_field_blocks(db, run_id, *field, first_whole, last_whole)) buckets.add(b.block, b.part);
  if (cut_tail) rows_as_block(tail, std::max(first_step_of(tail), first), last);
  return buckets.finish();
}

void for_each_spread(Database& db, int64_t run_id, int64_t first_step, int64_t last_step, Fields fields,
                     const std::function<void(const StepSpread&)>& visit) {
  Statement& st = db.cached("SELECT step, time, ranks, " + spread_column_list(fields) +
                            " FROM metric_spread WHERE run_id = ? AND step BETWEEN ? AND ? ORDER BY step");
  st.bind_all(run_id, first_step, last_step);
  StepSpread s;
  while (st.step()) {
    s.step = st.int64(0);
    s.time = st.real(1);
    s.ranks = st.int64(2);
    s.fields = read_spreads(st, 3, fields.size());
    visit(s);
  }
}

}  // namespace kiln::store
