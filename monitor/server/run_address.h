// How the API names a run or a sweep among several stores (docs/dashboard.md#several-stores).
// Ids are each store's own integers, so a row of another store than the first goes by
// LABEL:ID (or LABEL:NAME), its store's label before a ':' that no name holds; the first
// store's rows keep their plain ids and names, so the URLs and clients of a one-store
// server work unchanged.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "monitor/server/served_stores.h"

namespace kiln::monitor {

// A run or a sweep, and the store it is in.
struct StoredRow {
  ServedStore* store = nullptr;
  int64_t id = 0;
};

// What a request typed for {run} (an ApiError 404 when it names no run, or several, listing
// the candidates by address):
//   LABEL:RUN  RUN (an id, a name or a prefix of one name) in the store of that label;
//   ID         the first store's run of that id;
//   NAME       the first store's run of that name; else the run of that name in the one other
//              store that has one; else the one run of any store whose name starts so.
// With one store this is store::resolve_run, its messages unchanged.
StoredRow resolve_run(const ServedStores& stores, const std::string& typed);
// The same for {sweep}.
StoredRow resolve_sweep(const ServedStores& stores, const std::string& typed);

// A row's id as the API hands it out, and takes back: the id itself (a number) for the first
// store's rows, "LABEL:ID" for another store's.
nlohmann::json address(const ServedStore& store, int64_t id);
nlohmann::json address(const ServedStore& store, const std::optional<int64_t>& id);  // null stays null
// The same as text, for messages: "3", "b:3".
std::string address_text(const ServedStore& store, int64_t id);
// A run record's JSON (store::to_json) as the API hands it out: its `id`, `parent_id` and
// `sweep_id` as addresses, with the store's `store` label and `writable` (false: the server
// shows its store read-only, and refuses every change to the run).
void address_run(nlohmann::json& run, const ServedStore& store);

}  // namespace kiln::monitor
