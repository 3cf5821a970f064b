#include "monitor/server/static_ui.h"

#include <string>

#include "monitor/server/embedded_files.h"

namespace kiln::monitor {
namespace {

std::string content_type(std::string_view path) {
  const auto ends = [&](std::string_view suffix) {
    return path.size() >= suffix.size() && path.substr(path.size() - suffix.size()) == suffix;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  if (ends(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

}  // namespace

std::optional<Reply> static_file(std::string_view path) {
  if (path == "/") path = "/index.html";
  for (const EmbeddedFile& file : embedded_files()) {
    if (file.path != path) continue;
    Reply reply;
    reply.content_type = content_type(path);
    reply.body = std::string(file.data);
    return reply;
  }
  return std::nullopt;
}

}  // namespace kiln::monitor
