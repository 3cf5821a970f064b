#include "store/store_folder.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "store/error.h"

namespace kiln::store {

std::vector<std::string> stores_in_folder(const std::string& dir, size_t most) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) fail("store: no folder at " + dir + " (--stores takes a folder of *.db run stores)");
  if (!fs::is_directory(st))
    fail("store: " + dir +
         " is not a folder (--stores takes a folder of *.db run stores; --store takes one store file)");
  std::vector<std::string> names;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= 3 || name.front() == '.' || it->path().extension() != ".db") continue;
    std::error_code file_ec;
    if (!fs::is_regular_file(it->path(), file_ec)) continue;
    names.push_back(name);
  }
  if (ec) fail("store: cannot list " + dir + ": " + ec.message());
  if (names.empty()) fail("store: " + dir + " holds no run stores (no *.db files)");
  if (names.size() > most)
    fail("store: " + dir + " holds " + std::to_string(names.size()) +
         " run stores (*.db files); a dashboard shows at most " + std::to_string(most) + " at once");
  std::sort(names.begin(), names.end());
  std::vector<std::string> paths;
  for (const std::string& name : names) paths.push_back((fs::path(dir) / name).string());
  return paths;
}

}  // namespace kiln::store
