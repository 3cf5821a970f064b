#include "store/lineage.h"

#include "store/run_queries.h"

namespace kiln::store {

Lineage run_lineage(Database& db, int64_t run_id, double stale_after_s) {
  Lineage lineage;
  RunRecord run = get_run(db, run_id, stale_after_s);
  // A parent link points at an older run (a fork records its parent when it starts), so the
  // walk ends; the bound is for a store edited by hand.
  while (run.parent_id && lineage.ancestors.size() < kMaxAncestors) {
    const int64_t step = run.parent_step.value_or(0);
    run = get_run(db, *run.parent_id, stale_after_s);
    lineage.ancestors.push_back({run.id, run.name, run.status, step});
  }
  Statement& forks = db.cached("SELECT id FROM runs WHERE parent_id = ? ORDER BY id LIMIT ?");
  forks.bind_all(run_id, static_cast<int64_t>(kMaxForks));
  std::vector<int64_t> ids;
  while (forks.step()) ids.push_back(forks.int64(0));
  for (const int64_t id : ids) {
    const RunRecord fork = get_run(db, id, stale_after_s);
    lineage.forks.push_back({fork.id, fork.name, fork.status, fork.parent_step.value_or(0)});
  }
  return lineage;
}

}  // namespace kiln::store
