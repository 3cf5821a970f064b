// The API's writes: steering commands into the store's queue, tags, notes, removal. The
// router lets these through only with the token, when one is set.
#include <string>
#include <vector>

#include "base/check.h"
#include "monitor/server/api_call.h"
#include "store/commands.h"
#include "store/json_rows.h"
#include "store/run_figures.h"
#include "store/run_queries.h"

namespace kiln::monitor {

using nlohmann::json;

namespace {

std::string string_field(const json& body, const char* name, bool required) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) {
    if (required) throw ApiError(http::status::bad_request, std::string("the body needs \"") + name + "\"");
    return {};
  }
  if (!it->is_string())
    throw ApiError(http::status::bad_request, std::string("\"") + name + "\" must be a string");
  return it->get<std::string>();
}

std::vector<std::string> strings_field(const json& body, const char* name) {
  const auto it = body.find(name);
  if (it == body.end()) return {};
  const auto bad = [&] {
    return ApiError(http::status::bad_request, std::string("\"") + name + "\" must be an array of strings");
  };
  if (!it->is_array()) throw bad();
  std::vector<std::string> items;
  for (const json& item : *it) {
    if (!item.is_string()) throw bad();
    items.push_back(item.get<std::string>());
  }
  return items;
}

void require_live(store::Database& db, int64_t run_id) {
  const store::RunRecord run = store::get_run(db, run_id);
  if (!store::is_live(run.status))
    throw ApiError(http::status::conflict, "run " + std::to_string(run_id) + " is " +
                                               std::string(store::to_string(run.status)) +
                                               "; only a running or paused run takes commands");
}

}  // namespace

Reply post_command(ApiCall& call) {
  const json body = call.json_body();
  const store::CommandAction action = store::parse_command_action(string_field(body, "action", true));
  std::string argument;
  const auto force = body.find("force");
  if (force != body.end() && !force->is_boolean())
    throw ApiError(http::status::bad_request, "\"force\" must be true or false");
  if (action == store::CommandAction::Set) {
    argument = string_field(body, "setting", true);
  } else if (body.contains("setting") || force != body.end()) {
    throw ApiError(http::status::bad_request, "only \"set\" takes a \"setting\" and \"force\"");
  }
  auto db = call.writes();
  require_live(*db, call.run_id);
  const auto& normalize = call.state.options().normalize_setting;
  if (action == store::CommandAction::Set && normalize)
    argument = normalize(argument, store::get_run(*db, call.run_id).config_json, force != body.end() && force->get<bool>());
  const int64_t id = store::insert_command(*db, call.run_id, action, argument);
  for (const auto& command : store::list_commands(*db, call.run_id))
    if (command.id == id) return json_reply(store::to_json(command), http::status::accepted);
  throw ApiError(http::status::internal_server_error, "the queued command is gone from the store");
}

Reply post_tags(ApiCall& call) {
  const json body = call.json_body();
  const auto add = strings_field(body, "add");
  const auto remove = strings_field(body, "remove");
  auto db = call.writes();
  if (!add.empty()) store::add_tags(*db, call.run_id, add);
  if (!remove.empty()) store::remove_tags(*db, call.run_id, remove);
  return json_reply({{"tags", store::get_run(*db, call.run_id).tags}});
}

Reply put_notes(ApiCall& call) {
  const std::string notes = string_field(call.json_body(), "notes", true);
  auto db = call.writes();
  store::set_notes(*db, call.run_id, notes);
  return json_reply({{"notes", notes}});
}

Reply delete_run(ApiCall& call) {
  const bool force = call.target.text("force").value_or("") == "1";
  auto db = call.writes();
  if (!force && store::is_live(store::get_run(*db, call.run_id).status))
    throw ApiError(http::status::conflict,
                   "run " + std::to_string(call.run_id) + " is live; add ?force=1 to remove it anyway");
  store::remove_run(*db, call.run_id, force);
  return json_reply({{"removed", call.run_id}});
}

}  // namespace kiln::monitor
