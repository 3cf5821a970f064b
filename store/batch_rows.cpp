#include "store/batch_rows.h"

#include "store/metric_blocks.h"
#include "store/metric_spread.h"
#include "store/rows.h"

namespace kiln::store {
namespace {

void write_item(Database& db, int64_t run, const WriteItem& item, BlockUpdate& blocks, SpreadUpdate& spread) {
  if (const auto* m = std::get_if<MetricBatch>(&item)) {
    for (const auto& row : m->rows) insert_metric(db, run, row);
    blocks.add(m->rows);
    spread.add(m->rows);
    if (m->step_seconds) {
      Statement& st = db.cached("UPDATE runs SET step_seconds = ? WHERE id = ?");
      st.bind_all(*m->step_seconds, run);
      st.run();
    }
  } else if (const auto* s = std::get_if<SystemBatch>(&item)) {
    for (const auto& row : s->rows) insert_system(db, run, row);
  } else if (const auto* v = std::get_if<ValidRow>(&item)) {
    insert_valid(db, run, *v);
  } else if (const auto* batch = std::get_if<SampleBatch>(&item)) {
    // A resumed run samples a step again, perhaps with fewer prompts: the step's rows are
    // what it wrote last, none left over from before.
    if (!batch->samples.empty()) {
      Statement& clear = db.cached("DELETE FROM samples WHERE run_id = ? AND step = ?");
      clear.bind_all(run, batch->samples.front().step);
      clear.run();
    }
    for (const Sample& sample : batch->samples) insert_sample(db, run, sample);
  } else if (const auto* experts = std::get_if<ExpertBatch>(&item)) {
    for (const auto& load : experts->loads) insert_expert_load(db, run, load);
  } else if (const auto* e = std::get_if<Event>(&item)) {
    insert_event(db, run, *e);
  } else if (const auto* c = std::get_if<Checkpoint>(&item)) {
    insert_checkpoint(db, run, *c);
    std::string message = "wrote " + c->path;
    if (c->bytes) message += " (" + std::to_string(*c->bytes) + " bytes)";
    insert_event(db, run, Event{0, c->time, c->step, std::string(event_kind::kCheckpoint), message});
  } else if (const auto* change = std::get_if<StatusChange>(&item)) {
    const std::string status(to_string(change->status));
    if (is_terminal(change->status)) {
      Statement& st = db.cached("UPDATE runs SET status = ?, ended_at = ?, error = ?, pid = NULL WHERE id = ?");
      st.bind(1, status).bind(2, change->time).bind(4, run);
      if (!change->error.empty()) st.bind(3, change->error);
      st.run();
      insert_event(db, run,
                   Event{0, change->time, std::nullopt, std::string(event_kind::kEnd),
                         change->error.empty() ? status : status + ": " + change->error});
    } else {
      Statement& st = db.cached("UPDATE runs SET status = ? WHERE id = ?");
      st.bind_all(status, run);
      st.run();
      insert_event(db, run,
                   Event{0, change->time, std::nullopt, std::string(event_kind::kStatus), status});
    }
  }
  // A Heartbeat needs no row of its own: write_batch stamps the run.
}

}  // namespace

void write_batch(Database& db, int64_t run, const Batch& batch, const std::string& note, double now) {
  // The metric blocks and spreads once for the whole batch, after its rows: a block or step
  // touched by many queued intervals is read and written once. The blocks first: the spread
  // prunes rows they may read.
  BlockUpdate blocks;
  SpreadUpdate spread;
  for (const auto& item : batch.items) write_item(db, run, item, blocks, spread);
  blocks.write(db, run);
  spread.write(db, run);
  if (batch.dropped.any()) {
    std::optional<int64_t> step;
    if (batch.dropped.metric_rows > 0) step = batch.dropped.last_step;
    insert_event(db, run,
                 Event{0, now, step, std::string(event_kind::kDropped), batch.dropped.describe()});
  }
  if (!note.empty())
    insert_event(db, run, Event{0, now, std::nullopt, std::string(event_kind::kError), note});
  // Every commit is a sign of life.
  Statement& beat = db.cached("UPDATE runs SET heartbeat_at = ? WHERE id = ?");
  beat.bind_all(now, run);
  beat.run();
}

}  // namespace kiln::store
