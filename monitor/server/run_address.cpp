#include "monitor/server/run_address.h"

#include <algorithm>
#include <cstddef>
#include <string_view>
#include <vector>

#include "monitor/server/api_reply.h"
#include "store/error.h"
#include "store/name_lookup.h"
#include "store/run_queries.h"
#include "store/sweep_queries.h"

namespace kiln::monitor {
namespace {

// Candidates an ambiguous or unknown name's error lists, as store::resolve_named does.
constexpr size_t kAmbiguousShown = 8;
constexpr size_t kNearShown = 5;

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

struct Candidate {
  ServedStore* store;
  store::NamedRow row;
};

// "base (a:1), base (b:4), and more": each by the address every store takes.
std::string listed(const std::vector<Candidate>& candidates, size_t shown) {
  std::string text;
  for (size_t i = 0; i < candidates.size() && i < shown; ++i)
    text += (text.empty() ? "" : ", ") + candidates[i].row.name + " (" + candidates[i].store->label + ":" +
            std::to_string(candidates[i].row.id) + ")";
  if (candidates.size() > shown) text += ", and more";
  return text;
}

// RUN in one store, as store::resolve_named reads it; what it refuses is a 404.
StoredRow resolve_in(ServedStore& store, std::string_view typed, const store::NamedRows& rows) {
  auto db = store.reads.borrow();
  try {
    return {&store, store::resolve_named(*db, typed, rows)};
  } catch (const store::DatabaseError&) {
    throw;
  } catch (const Error& e) {
    throw ApiError(http::status::not_found, e.what());
  }
}

StoredRow resolve(const ServedStores& stores, const std::string& typed, const store::NamedRows& rows) {
  const std::string noun = rows.noun;
  const size_t colon = typed.find(':');
  if (colon != std::string::npos) {
    const std::string label = typed.substr(0, colon);
    if (ServedStore* store = stores.find(label))
      return resolve_in(*store, std::string_view(typed).substr(colon + 1), rows);
    if (stores.size() > 1)
      throw ApiError(http::status::not_found,
                     "store: no store labelled '" + label + "' on this server (its stores: " + stores.labels() + ")");
  }
  ServedStore& first = stores.first();
  if (stores.size() == 1 || all_digits(typed)) return resolve_in(first, typed, rows);

  // A name: the first store's run of that name is the one it always named.
  std::vector<Candidate> exact;
  for (size_t i = 0; i < stores.size(); ++i) {
    auto db = stores[i].reads.borrow();
    if (const auto id = store::row_named(*db, typed, rows)) {
      if (i == 0) return {&first, *id};
      exact.push_back({&stores[i], {*id, typed}});
    }
  }
  const auto ambiguous = [&](const std::vector<Candidate>& candidates) {
    return ApiError(http::status::not_found,
                    "store: " + noun + " '" + typed + "' is ambiguous: " + listed(candidates, kAmbiguousShown) +
                        "; give LABEL:NAME or LABEL:ID, such as " + candidates.back().store->label + ":" +
                        candidates.back().row.name);
  };
  if (exact.size() == 1) return {exact.front().store, exact.front().row.id};
  if (exact.size() > 1) throw ambiguous(exact);

  // A prefix of one name in all the stores.
  std::vector<Candidate> prefixed;
  for (size_t i = 0; i < stores.size() && prefixed.size() <= kAmbiguousShown; ++i) {
    auto db = stores[i].reads.borrow();
    for (auto& row : store::rows_named_from(*db, typed, rows, kAmbiguousShown + 1 - prefixed.size()))
      prefixed.push_back({&stores[i], std::move(row)});
  }
  if (prefixed.size() == 1) return {prefixed.front().store, prefixed.front().row.id};
  if (prefixed.size() > 1) throw ambiguous(prefixed);

  std::vector<Candidate> near;
  for (size_t i = 0; i < stores.size() && near.size() < kNearShown; ++i) {
    auto db = stores[i].reads.borrow();
    for (auto& row : store::rows_named_like(*db, typed, rows, kNearShown - near.size()))
      near.push_back({&stores[i], std::move(row)});
  }
  throw ApiError(http::status::not_found, "store: no " + noun + " named '" + typed + "' in any of the " +
                                              std::to_string(stores.size()) + " stores (" + stores.labels() + ")" +
                                              (near.empty() ? "" : "; did you mean " + listed(near, kNearShown) + "?"));
}

}  // namespace

StoredRow resolve_run(const ServedStores& stores, const std::string& typed) {
  return resolve(stores, typed, store::kNamedRuns);
}

StoredRow resolve_sweep(const ServedStores& stores, const std::string& typed) {
  return resolve(stores, typed, store::kNamedSweeps);
}

nlohmann::json address(const ServedStore& store, int64_t id) {
  if (store.index == 0) return id;
  return address_text(store, id);
}

std::string address_text(const ServedStore& store, int64_t id) {
  return store.index == 0 ? std::to_string(id) : store.label + ":" + std::to_string(id);
}

nlohmann::json address(const ServedStore& store, const std::optional<int64_t>& id) {
  return id ? address(store, *id) : nlohmann::json();
}

void address_run(nlohmann::json& run, const ServedStore& store) {
  for (const char* key : {"id", "parent_id", "sweep_id"})
    if (const auto it = run.find(key); it != run.end() && it->is_number_integer())
      *it = address(store, it->get<int64_t>());
  run["store"] = store.label;
  run["writable"] = store.writable;
}

}  // namespace kiln::monitor
