#include "store/rows.h"

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "base/overloaded.h"
#include "store/error.h"
#include "store/expert_load.h"
#include "store/metric_fields.h"

namespace kiln::store {
namespace {

// Per-expert counts as the expert_loads blobs hold them: one little-endian i64 each.
std::vector<std::byte> encode_counts(const std::vector<int64_t>& counts) {
  std::vector<std::byte> blob(counts.size() * 8);
  for (size_t e = 0; e < counts.size(); ++e)
    for (size_t b = 0; b < 8; ++b)
      blob[e * 8 + b] = static_cast<std::byte>(static_cast<uint64_t>(counts[e]) >> (8 * b));
  return blob;
}

std::vector<int64_t> decode_counts(std::span<const std::byte> blob) {
  if (blob.size() % 8 != 0)
    fail("store: an expert_loads row holds " + std::to_string(blob.size()) + " bytes of counts, not a multiple of 8");
  std::vector<int64_t> counts(blob.size() / 8);
  for (size_t e = 0; e < counts.size(); ++e) {
    uint64_t bits = 0;
    for (size_t b = 0; b < 8; ++b) bits |= static_cast<uint64_t>(blob[e * 8 + b]) << (8 * b);
    counts[e] = static_cast<int64_t>(bits);
  }
  return counts;
}

}  // namespace

void insert_metric(Database& db, int64_t run_id, const MetricRow& r) {
  static const std::string sql = [] {
    std::string values = "?";
    for (size_t i = 0; i < std::size(kMetricFields); ++i) values += ",?";
    return "INSERT OR REPLACE INTO metrics (run_id, " + metric_column_list() + ") VALUES (" + values + ")";
  }();
  Statement& st = db.cached(sql);
  st.bind(1, run_id);
  int index = 2;
  for (const MetricField& f : kMetricFields)
    std::visit([&](auto member) { st.bind(index++, r.*member); }, f.member);
  st.run();
}

void insert_valid(Database& db, int64_t run_id, const ValidRow& r) {
  Statement& st =
      db.cached("INSERT OR REPLACE INTO valid_metrics (run_id, step, time, loss) VALUES (?,?,?,?)");
  st.bind_all(run_id, r.step, r.time, r.loss);
  st.run();
}

void insert_system(Database& db, int64_t run_id, const SystemRow& r) {
  static const std::string sql = std::string("INSERT OR REPLACE INTO system_metrics (run_id, ") +
                                 kSystemColumns + ") VALUES (?,?,?,?,?,?,?,?,?,?,?)";
  Statement& st = db.cached(sql);
  st.bind_all(run_id, r.rank, r.time, r.gpu_util, r.gpu_mem_used, r.gpu_power_w, r.gpu_temp_c,
              r.cpu_percent, r.rss_bytes, r.host_mem_used, r.host_mem_total);
  st.run();
}

int64_t insert_event(Database& db, int64_t run_id, const Event& e) {
  Statement& st =
      db.cached("INSERT INTO events (run_id, time, step, kind, message) VALUES (?,?,?,?,?)");
  st.bind_all(run_id, e.time, e.step, e.kind, e.message);
  st.run();
  return db.last_insert_rowid();
}

void insert_checkpoint(Database& db, int64_t run_id, const Checkpoint& c) {
  Statement& st = db.cached(
      "INSERT OR REPLACE INTO checkpoints (run_id, step, path, bytes, layout, time, seconds) "
      "VALUES (?,?,?,?,?,?,?)");
  st.bind_all(run_id, c.step, c.path, c.bytes, c.layout, c.time, c.seconds);
  st.run();
}

void insert_sample(Database& db, int64_t run_id, const Sample& s) {
  static const std::string sql = std::string("INSERT OR REPLACE INTO samples (run_id, ") +
                                 kSampleColumns + ") VALUES (?,?,?,?,?,?,?)";
  Statement& st = db.cached(sql);
  st.bind_all(run_id, s.step, int64_t{s.slot}, s.time, s.prompt, s.text, s.temperature);
  st.run();
}

void insert_expert_load(Database& db, int64_t run_id, const ExpertLoad& load) {
  static const std::string sql = std::string("INSERT OR REPLACE INTO expert_loads (run_id, ") +
                                 kExpertLoadColumns + ", imbalance) VALUES (?,?,?,?,?,?,?,?)";
  Statement& st = db.cached(sql);
  const bool any_dropped = std::any_of(load.dropped.begin(), load.dropped.end(), [](int64_t n) { return n > 0; });
  const std::vector<std::byte> tokens = encode_counts(load.tokens);
  const std::vector<std::byte> dropped = any_dropped ? encode_counts(load.dropped) : std::vector<std::byte>{};
  st.bind_all(run_id, load.step, load.layer, std::span<const std::byte>(tokens));
  if (any_dropped) st.bind(5, std::span<const std::byte>(dropped));
  else st.bind(5, std::nullopt);
  st.bind(6, load.aux_loss).bind(7, load.router_entropy).bind(8, expert_imbalance(load.tokens));
  st.run();
}

MetricRow read_metric(const Statement& st, int i) {
  MetricRow r;
  for (const MetricField& f : kMetricFields) {
    std::visit(Overloaded{[&](int64_t MetricRow::*m) { r.*m = st.int64(i); },
                          [&](int MetricRow::*m) { r.*m = static_cast<int>(st.int64(i)); },
                          [&](double MetricRow::*m) { r.*m = st.real(i); },
                          [&](std::optional<int64_t> MetricRow::*m) { r.*m = st.opt_int64(i); }},
               f.member);
    ++i;
  }
  return r;
}

SystemRow read_system(const Statement& st, int i) {
  SystemRow r;
  r.rank = static_cast<int>(st.int64(i));
  r.time = st.real(i + 1);
  r.gpu_util = st.real(i + 2);
  r.gpu_mem_used = st.opt_int64(i + 3);
  r.gpu_power_w = st.real(i + 4);
  r.gpu_temp_c = st.real(i + 5);
  r.cpu_percent = st.real(i + 6);
  r.rss_bytes = st.opt_int64(i + 7);
  r.host_mem_used = st.opt_int64(i + 8);
  r.host_mem_total = st.opt_int64(i + 9);
  return r;
}

Event read_event(const Statement& st, int i) {
  Event e;
  e.id = st.int64(i);
  e.time = st.real(i + 1);
  e.step = st.opt_int64(i + 2);
  e.kind = st.text(i + 3);
  e.message = st.text(i + 4);
  return e;
}

Checkpoint read_checkpoint(const Statement& st, int i) {
  Checkpoint c;
  c.step = st.int64(i);
  c.path = st.text(i + 1);
  c.bytes = st.opt_int64(i + 2);
  c.layout = st.text(i + 3);
  c.time = st.real(i + 4);
  c.seconds = st.opt_real(i + 5);
  return c;
}

Command read_command(const Statement& st, int i) {
  Command c;
  c.id = st.int64(i);
  c.run_id = st.int64(i + 1);
  c.created_at = st.real(i + 2);
  c.action = parse_command_action(st.text(i + 3));
  c.argument = st.text(i + 4);
  c.status = parse_command_status(st.text(i + 5));
  c.applied_step = st.opt_int64(i + 6);
  c.applied_at = st.opt_real(i + 7);
  c.reason = st.text(i + 8);
  return c;
}

Sample read_sample(const Statement& st, int i) {
  Sample s;
  s.step = st.int64(i);
  s.slot = static_cast<int>(st.int64(i + 1));
  s.time = st.real(i + 2);
  s.prompt = st.text(i + 3);
  s.text = st.text(i + 4);
  s.temperature = st.real(i + 5);
  return s;
}

ExpertLoad read_expert_load(const Statement& st, int i) {
  ExpertLoad load;
  load.step = st.int64(i);
  load.layer = static_cast<int>(st.int64(i + 1));
  load.tokens = decode_counts(st.blob(i + 2));
  if (!st.is_null(i + 3)) load.dropped = decode_counts(st.blob(i + 3));
  load.aux_loss = st.real(i + 4);
  load.router_entropy = st.real(i + 5);
  return load;
}

}  // namespace kiln::store
