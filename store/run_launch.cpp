#include "store/run_launch.h"

#include <nlohmann/json.hpp>

#include "store/error.h"

namespace kiln::store {
namespace {

using nlohmann::json;

[[noreturn]] void refuse(const std::string& why) { fail("store: the launch record " + why); }

std::string text_of(const json& value, const char* key) {
  if (!value.is_string()) refuse(std::string("holds a ") + key + " that is not text");
  return value.get<std::string>();
}

int64_t count_of(const json& value, const char* key) {
  if (!value.is_number_integer() || value.get<int64_t>() < 1)
    refuse(std::string("holds a ") + key + " that is not a whole number of 1 or more");
  return value.get<int64_t>();
}

}  // namespace

std::string launch_to_json(const RunLaunch& launch) {
  if (launch.serve.empty()) return "{}";
  return json{{"serve", launch.serve},
              {"allow_hosts", launch.allowed_hosts},
              {"max_connections", launch.max_connections},
              {"max_subscribers", launch.max_subscribers},
              {"token", launch.token}}
      .dump();
}

RunLaunch parse_launch(std::string_view text) {
  const json record = json::parse(text, nullptr, false);
  if (!record.is_object()) refuse("is not a JSON object");
  RunLaunch launch;
  bool dashboard_option = false;
  for (const auto& [key, value] : record.items()) {
    if (key == "serve") {
      launch.serve = text_of(value, "serve address");
      continue;
    }
    dashboard_option = true;
    if (key == "allow_hosts") {
      if (!value.is_array()) refuse("holds allow_hosts that is not a list");
      for (const json& host : value) launch.allowed_hosts.push_back(text_of(host, "host name"));
    } else if (key == "max_connections") {
      launch.max_connections = count_of(value, "max_connections");
    } else if (key == "max_subscribers") {
      launch.max_subscribers = count_of(value, "max_subscribers");
    } else if (key == "token") {
      if (!value.is_boolean()) refuse("holds a token flag that is not true or false");
      launch.token = value.get<bool>();
    } else {
      refuse("holds '" + key + "', which kiln does not record");
    }
  }
  if (dashboard_option && launch.serve.empty()) refuse("holds dashboard options without a serve address");
  return launch;
}

}  // namespace kiln::store
