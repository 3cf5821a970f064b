#include "store/run_overview.h"

#include <utility>
#include <vector>

#include "store/json_rows.h"
#include "store/run_figures.h"

namespace kiln::store {

RunOverview run_overview(Database& db, RunRecord run, double now_s) {
  RunOverview overview;
  overview.planned_steps = planned_steps(run.config_json);
  overview.duration_s = run_duration_s(run, now_s);
  if (run.last_step) {
    // A prepared statement kept for the next run: `kiln runs list` of 10,000 runs prepared a
    // statement a run and read every column of the rows to average three (1.9 s).
    Statement& st = db.cached(
        "SELECT avg(loss), avg(tokens_per_s), avg(mfu) FROM metrics WHERE run_id = ? AND step = ?");
    st.bind_all(run.id, *run.last_step);
    if (st.step()) {
      overview.loss = st.opt_real(0).value_or(kNoValue);
      overview.tokens_per_s = st.opt_real(1).value_or(kNoValue);
      overview.mfu = st.opt_real(2).value_or(kNoValue);
    }
    st.reset();
  }
  overview.run = std::move(run);
  return overview;
}

nlohmann::json to_json(const RunOverview& overview) {
  nlohmann::json item = to_json(overview.run);
  item["steps"] = json_number(overview.planned_steps);
  item["loss"] = json_number(overview.loss);
  item["tokens_per_s"] = json_number(overview.tokens_per_s);
  item["mfu"] = json_number(overview.mfu);
  item["duration_s"] = json_number(overview.duration_s);
  return item;
}

}  // namespace kiln::store
