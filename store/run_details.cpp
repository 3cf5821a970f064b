#include "store/run_details.h"

#include <algorithm>
#include <string>

#include "store/commands.h"
#include "store/expert_queries.h"
#include "store/lineage.h"
#include "store/metric_spread.h"
#include "store/rewind_rows.h"
#include "store/rows.h"
#include "store/sample_queries.h"

namespace kiln::store {

RunDetails run_details(Database& db, int64_t run_id, size_t max_events, double stale_after_s) {
  RunDetails d;
  d.run = get_run(db, run_id, stale_after_s);
  if (d.run.last_step) {
    const int64_t step = *d.run.last_step;
    const auto keep = [&](const MetricRow& row) { d.latest.push_back(row); };
    d.latest_ranks = for_each_row_beside_spread(db, run_id, keep, step, step) > 0
                         ? wide_step_ranks(db, run_id, step)
                         : static_cast<int64_t>(d.latest.size());
  }
  {
    Statement& st = db.cached(
        "SELECT step, time, loss FROM valid_metrics WHERE run_id = ? ORDER BY step DESC LIMIT 1");
    st.bind(1, run_id);
    if (st.step()) d.latest_valid = ValidRow{st.int64(0), st.real(1), st.real(2)};
    st.reset();
  }
  d.latest_samples = latest_samples(db, run_id);
  d.latest_experts = latest_expert_loads(db, run_id);
  {
    static const std::string sql = std::string("SELECT * FROM (SELECT ") + kEventColumns +
                                   " FROM events WHERE run_id = ? ORDER BY id DESC LIMIT ?) "
                                   "ORDER BY id";
    Statement& st = db.cached(sql);
    st.bind(1, run_id).bind(2, static_cast<int64_t>(std::min<size_t>(max_events, INT64_MAX)));
    while (st.step()) d.events.push_back(read_event(st));
  }
  d.checkpoints = list_checkpoints(db, run_id);
  d.commands = list_commands(db, run_id);
  d.rewinds = list_rewinds(db, run_id);
  d.lineage = run_lineage(db, run_id, stale_after_s);
  return d;
}

std::vector<MetricRow> latest_rows_of_every_rank(Database& db, int64_t run_id) {
  static const std::string sql = "SELECT " + metric_column_list() +
                                 " FROM metrics WHERE run_id = ?1 AND step = "
                                 "(SELECT max(step) FROM metrics WHERE run_id = ?1) ORDER BY rank";
  Statement& st = db.cached(sql);
  st.bind(1, run_id);
  std::vector<MetricRow> rows;
  while (st.step()) rows.push_back(read_metric(st));
  return rows;
}

}  // namespace kiln::store
