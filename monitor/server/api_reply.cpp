#include "monitor/server/api_reply.h"

namespace kiln::monitor {

std::string dump_json(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Reply json_reply(const nlohmann::json& value, http::status status) {
  Reply reply;
  reply.status = status;
  reply.body = dump_json(value);
  return reply;
}

Reply error_reply(http::status status, const std::string& message) {
  return json_reply({{"error", message}}, status);
}

}  // namespace kiln::monitor
