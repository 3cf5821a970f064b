// The label each store of a server goes by when it shows several (docs/dashboard.md#several-
// stores): the runs list's store column, the `store` of each run's JSON, the `store` label of
// Prometheus' series and the LABEL of a run's address LABEL:RUN.
#pragma once

#include <string>
#include <vector>

namespace kiln::monitor {

// One label per path, in order: the file's stem (`/data/gpu-node-a.db` -> `gpu-node-a`), each
// character a run name may not hold (base/run_names.h) made `_`, so a label never holds the
// ':' that ends it in an address; `store` for an empty stem. A label an earlier path took
// gets the first free `-2`, `-3`, ... (`a/runs.db`, `b/runs.db` -> `runs`, `runs-2`).
std::vector<std::string> store_labels(const std::vector<std::string>& paths);

}  // namespace kiln::monitor
