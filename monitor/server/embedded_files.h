// The web UI's files, compiled into the binary (cmake/embed_files.cmake writes the table from
// webui/ at build time), so the server needs nothing beside it and no request path ever
// reaches the file system.
#pragma once

#include <span>
#include <string_view>

namespace kiln::monitor {

struct EmbeddedFile {
  std::string_view path;  // as requested: "/index.html", "/vendor/uPlot.iife.min.js"
  std::string_view data;
};

std::span<const EmbeddedFile> embedded_files();

}  // namespace kiln::monitor
