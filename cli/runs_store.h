// How the `kiln runs` subcommands find and open the run store.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "store/database.h"

namespace kiln {

// Adds --store PATH to a subcommand; the value is resolved with resolve_store_path.
void add_store_option(CLI::App* command, std::string& flag);

// Opens an existing store read-only. A missing file is one clear error; nothing is created.
std::unique_ptr<store::Database> open_store_for_reading(const std::string& flag);

// Opens an existing store for an edit. A missing file is never created, and a file that is
// not a kiln store is refused before anything in it changes (store::open_store).
std::unique_ptr<store::Database> open_store_for_writing(const std::string& flag);

}  // namespace kiln
