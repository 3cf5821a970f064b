#include "store/rank_places.h"

#include "base/utf8.h"

#include <algorithm>


namespace kiln::store {

void write_rank_places(Database& db, int64_t run_id, const std::vector<RankPlace>& places) {
  Statement& clear = db.cached("DELETE FROM run_ranks WHERE run_id = ?");
  clear.bind_all(run_id);
  clear.run();
  Statement& insert = db.cached("INSERT OR REPLACE INTO run_ranks (run_id, rank, host, device, pid) VALUES (?, ?, ?, ?, ?)");
  const size_t n = std::min(places.size(), kMaxRankPlaces);
  for (size_t i = 0; i < n; ++i) {
    const RankPlace& p = places[i];
    // Host names come from the machines, not the user: kept, made valid text, never refused.
    insert.reset();
    insert.bind_all(run_id, p.rank, storable_text(p.host, 256), storable_text(p.device, 64), p.pid);
    insert.run();
  }
}

std::vector<RankPlace> list_rank_places(Database& db, int64_t run_id) {
  Statement& st = db.cached("SELECT rank, host, device, pid FROM run_ranks WHERE run_id = ? ORDER BY rank");
  st.bind_all(run_id);
  std::vector<RankPlace> places;
  while (st.step())
    places.push_back(RankPlace{static_cast<int>(st.int64(0)), st.text(1), st.text(2), st.opt_int64(3)});
  return places;
}

}  // namespace kiln::store
