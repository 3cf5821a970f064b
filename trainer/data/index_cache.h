// Where a dataset's index arrays are cached, and whether a complete cache is there.
//
// A cache is a set of .npy files plus a description, all named
//   DIR/NAME-HASH-SPLIT-ARRAY.npy and DIR/NAME-HASH-SPLIT-description.json
// where HASH is the SHA-256 (first 16 hex digits) of the description: everything that
// shapes the arrays (the data files' identity, the split, seq_len, seed, sample count).
// The arrays are written first and the description last, each through a temporary name
// renamed into place, so a description on disk means the arrays beside it are whole; a run
// that dies mid-build leaves no description and the next run builds again. Several
// processes building the same cache at once write the same bytes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kiln {

class IndexCache {
 public:
  // dir: the cache folder (created when missing; kiln::Error naming it when it cannot be).
  IndexCache(const std::string& dir, const std::string& name, const std::string& split,
             nlohmann::json description);

  // True when a description matching this one is on disk; stored() then returns it
  // (with whatever write_description added).
  bool complete() const { return complete_; }
  const nlohmann::json& stored() const { return stored_; }
  // Why a description on disk was not taken ("" when there was none, or it matched): the
  // cache is then damaged rather than missing, and is built again with a note.
  const std::string& damage() const { return damage_; }

  std::string array_path(const std::string& array) const;  // ARRAY.npy
  const std::string& stem() const { return stem_; }         // DIR/NAME-HASH-SPLIT-
  // Marks the cache complete: the description plus `facts` found while building.
  void write_description(const nlohmann::json& facts);

 private:
  std::string stem_;  // DIR/NAME-HASH-SPLIT-
  nlohmann::json description_, stored_;
  bool complete_ = false;
  std::string damage_;
};

// The cache folder for a dataset prefix: cache_dir when set, else PREFIX's folder/cache.
std::string cache_dir_for(const std::string& prefix, const std::string& cache_dir);

}  // namespace kiln
