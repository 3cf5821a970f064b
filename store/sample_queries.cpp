#include "store/sample_queries.h"

#include <algorithm>
#include <string>

#include "store/rows.h"

namespace kiln::store {

std::vector<Sample> list_samples(Database& db, int64_t run_id, size_t limit, int64_t after_step) {
  static const std::string sql = std::string("SELECT * FROM (SELECT ") + kSampleColumns +
                                 " FROM samples WHERE run_id = ? AND step > ? ORDER BY step DESC, slot DESC "
                                 "LIMIT ?) ORDER BY step, slot";
  Statement& st = db.cached(sql);
  st.bind_all(run_id, after_step, static_cast<int64_t>(std::min<size_t>(limit, INT64_MAX)));
  std::vector<Sample> samples;
  while (st.step()) samples.push_back(read_sample(st));
  return samples;
}

std::vector<Sample> latest_samples(Database& db, int64_t run_id) {
  static const std::string sql = std::string("SELECT ") + kSampleColumns +
                                 " FROM samples WHERE run_id = ?1 AND step = "
                                 "(SELECT MAX(step) FROM samples WHERE run_id = ?1) ORDER BY slot";
  Statement& st = db.cached(sql);
  st.bind_all(run_id);
  std::vector<Sample> samples;
  while (st.step()) samples.push_back(read_sample(st));
  return samples;
}

}  // namespace kiln::store
