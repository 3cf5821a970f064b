#include "store/rewind_rows.h"

#include <string>

#include "base/utf8.h"
#include "store/metric_blocks.h"
#include "store/rows.h"
#include "store/spread_blocks.h"

namespace kiln::store {
namespace {

// The tables whose rows belong to one step of the run's training, which a rewind forgets past
// the step it goes back to.
constexpr const char* kStepTables[] = {"metrics", "metric_spread", "valid_metrics", "samples", "expert_loads",
                                       "checkpoints"};

}  // namespace

int64_t insert_rewind(Database& db, int64_t run_id, const Rewind& rewind) {
  const double time = rewind.time > 0 ? rewind.time : unix_now();
  const std::string message = storable_text(rewind.message, kMaxRewindMessageBytes);
  Statement& row = db.cached(
      "INSERT INTO rewinds (run_id, time, number, spike_step, from_step, to_step, checkpoint, "
      "first_skipped_batch, skipped_batches, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  row.bind_all(run_id, time, int64_t{rewind.number}, rewind.spike_step, rewind.from_step, rewind.to_step,
               storable_text(rewind.checkpoint, kMaxRewindMessageBytes), rewind.first_skipped_batch,
               rewind.skipped_batches, message);
  row.run();
  const int64_t id = db.last_insert_rowid();
  Statement& keep = db.cached(
      "INSERT INTO rewound_losses (rewind_id, step, time, loss) "
      "SELECT ?1, step, time, loss FROM metrics WHERE run_id = ?2 AND rank = 0 AND step > ?3");
  keep.bind_all(id, run_id, rewind.to_step);
  keep.run();
  for (const char* table : kStepTables) {
    Statement& forget = db.cached(std::string("DELETE FROM ") + table + " WHERE run_id = ? AND step > ?");
    forget.bind_all(run_id, rewind.to_step);
    forget.run();
  }
  trim_blocks_after(db, run_id, rewind.to_step);
  trim_spread_blocks_after(db, run_id, rewind.to_step);
  insert_event(db, run_id, Event{0, time, rewind.to_step, std::string(event_kind::kRewind), message});
  return id;
}

std::vector<Rewind> list_rewinds(Database& db, int64_t run_id) {
  Statement& st = db.cached(
      "SELECT id, time, number, spike_step, from_step, to_step, checkpoint, first_skipped_batch, "
      "skipped_batches, message FROM rewinds WHERE run_id = ? ORDER BY id");
  st.bind_all(run_id);
  std::vector<Rewind> rewinds;
  while (st.step()) {
    Rewind r;
    r.id = st.int64(0);
    r.time = st.real(1);
    r.number = static_cast<int>(st.int64(2));
    r.spike_step = st.int64(3);
    r.from_step = st.int64(4);
    r.to_step = st.int64(5);
    r.checkpoint = st.text(6);
    r.first_skipped_batch = st.int64(7);
    r.skipped_batches = st.int64(8);
    r.message = st.text(9);
    rewinds.push_back(std::move(r));
  }
  Statement& losses = db.cached("SELECT step, time, loss FROM rewound_losses WHERE rewind_id = ? ORDER BY step");
  for (Rewind& r : rewinds) {
    losses.bind_all(r.id);
    while (losses.step()) r.losses.push_back({losses.int64(0), losses.real(1), losses.real(2)});
    losses.reset();
  }
  return rewinds;
}

int64_t rewind_count(Database& db, int64_t run_id) {
  Statement& st = db.cached("SELECT count(*) FROM rewinds WHERE run_id = ?");
  st.bind_all(run_id);
  st.step();
  const int64_t count = st.int64(0);
  st.reset();
  return count;
}

}  // namespace kiln::store
