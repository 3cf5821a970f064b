#include "cli/runs_store.h"

#include <filesystem>

#include "cli/store_path.h"
#include "kernels/check.h"
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
