// Reading runs: listing with filters, resolving what a user typed, the rows that follow a run
// (store/run_details.h gathers one run's whole page); and the small edits a user makes to a
// run's record (tags, notes, removal).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/database.h"
#include "store/name_lookup.h"
#include "store/types.h"

namespace kiln::store {

// A running or paused run whose heartbeat is older than this reads as lost.
inline constexpr double kDefaultStaleAfterS = 30;

// A run whose config holds `value` at the dotted `key` (train.lr=0.001, model.arch=llama,
// train.cuda_graphs=true): numbers compare as numbers (3 matches 3.0), true and false as
// booleans, anything else as text.
struct ConfigMatch {
  std::string key, value;
};
// "KEY=VALUE"; a key that is not dotted words (letters, digits, _) is an error naming the form.
ConfigMatch parse_config_match(std::string_view text);

struct RunFilter {
  std::optional<RunStatus> status;  // the effective status: Lost finds dead runs
  std::string tag;                  // has this tag
  std::string name_contains;
  std::optional<double> since;      // created at or after, Unix seconds
  std::optional<int64_t> sweep_id;  // launched by this sweep (kiln sweep)
  std::vector<ConfigMatch> config;  // every one holds
  std::vector<std::string> words;   // each is in the name or in a tag, in any case (a search)
  int limit = 0;                    // 0: no limit
  // false: RunRecord::config_json is left empty. A list of thousands of runs reads a few
  // hundred bytes a run instead of each resolved config's few kilobytes.
  bool with_config = true;
};

// Newest first.
std::vector<RunRecord> list_runs(Database& db, const RunFilter& filter = {},
                           double stale_after_s = kDefaultStaleAfterS);
// The run with this id; an unknown id is an error.
RunRecord get_run(Database& db, int64_t run_id, double stale_after_s = kDefaultStaleAfterS);

// True when the process that records a live-looking run is known to be gone
// (store/process_gone.h).
bool recorder_gone(const RunRecord& run, const std::string& this_host);

// The run with exactly this name, if there is one.
std::optional<int64_t> find_run_named(Database& db, std::string_view name);

// What a user typed as RUN: an id, a name, or an unambiguous prefix of one name. An unknown
// or ambiguous one is an error that lists the candidates.
int64_t resolve_run(Database& db, std::string_view run);
// The runs table as resolve_run reads it (store/name_lookup.h).
inline constexpr NamedRows kNamedRuns{.table = "runs", .noun = "run", .list_hint = "`kiln runs list` shows them"};

// Rows for views that follow a run: events after an id, validation rows after a step, system
// rows at or after a time.
std::vector<Event> list_events(Database& db, int64_t run_id, int64_t after_id = 0);
std::vector<Checkpoint> list_checkpoints(Database& db, int64_t run_id);
std::vector<ValidRow> list_valid(Database& db, int64_t run_id,
                                 int64_t after_step = std::numeric_limits<int64_t>::min());
std::vector<SystemRow> list_system(Database& db, int64_t run_id, double since = 0);

void add_tags(Database& db, int64_t run_id, const std::vector<std::string>& tags);
void remove_tags(Database& db, int64_t run_id, const std::vector<std::string>& tags);
void set_notes(Database& db, int64_t run_id, const std::string& notes);
// Deletes the run and all its rows. A live (running or paused) run needs force.
void remove_run(Database& db, int64_t run_id, bool force = false,
                double stale_after_s = kDefaultStaleAfterS);

}  // namespace kiln::store
