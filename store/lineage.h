// A run's forks (kiln runs fork): the runs it descends from and the runs started from it,
// each with the step the branch was taken at, for `kiln runs show`, the dashboard's lineage
// and its charts, which draw a fork's curves continuing from its parent's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/database.h"
#include "store/run_queries.h"
#include "store/types.h"

namespace kiln::store {

// How far a lineage is followed: deeper ancestry or more forks than this are left out.
inline constexpr size_t kMaxAncestors = 64;
inline constexpr size_t kMaxForks = 256;

Lineage run_lineage(Database& db, int64_t run_id, double stale_after_s = kDefaultStaleAfterS);

}  // namespace kiln::store
