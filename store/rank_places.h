// Where each rank of a run runs (host, device, process), written when the run starts or
// resumes, so a straggler can be named by its host and the straggler view can show it.
#pragma once

#include <cstdint>
#include <vector>

#include "store/database.h"
#include "store/types.h"

namespace kiln::store {

// The most ranks a run records places for; a larger world keeps the first kMaxRankPlaces.
inline constexpr size_t kMaxRankPlaces = 16384;

// Replaces the run's places with these, in the caller's transaction.
void write_rank_places(Database& db, int64_t run_id, const std::vector<RankPlace>& places);
// The run's places by rank; empty for a run recorded before kiln kept them.
std::vector<RankPlace> list_rank_places(Database& db, int64_t run_id);

}  // namespace kiln::store
