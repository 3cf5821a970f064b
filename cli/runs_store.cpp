#include "cli/runs_store.h"

#include <filesystem>

#include "cli/store_path.h"
#include "base/check.h"
#include "store/schema.h"

namespace kiln {
namespace {

// The store file a command means, which must already exist: `kiln runs` reads and edits
// runs that `kiln train` recorded, so a missing file is a wrong path, not a new store.
std::string existing_store(const std::string& flag) {
  namespace fs = std::filesystem;
  const std::string path = resolve_store_path(flag);
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st))
    fail("store: no store at " + path +
         " (give --store PATH or set KILN_STORE; `kiln train` creates the store)");
  if (fs::is_directory(st)) fail("store: " + path + " is a folder, not a run store file");
  // An empty file (`touch`) would become a store on the first edit; a command that only
  // reads or changes runs must leave it as it found it.
  if (fs::is_regular_file(st) && fs::file_size(path, ec) == 0 && !ec)
    fail("store: " + path + " is empty, not a run store (`kiln train` creates the store)");
  return path;
}

}  // namespace

void add_store_option(CLI::App* command, std::string& flag) {
  command->add_option("--store", flag,
                      "Run store file (default: $KILN_STORE, else ./kiln-runs.db)");
}

std::unique_ptr<store::Database> open_store_for_reading(const std::string& flag) {
  return store::open_store(existing_store(flag), store::Access::ReadOnly);
}

std::unique_ptr<store::Database> open_store_for_writing(const std::string& flag) {
  return store::open_store(existing_store(flag), store::Access::ReadWrite);
}

}  // namespace kiln
