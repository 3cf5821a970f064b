#pragma once

#include <CLI/CLI.hpp>

namespace kiln {

// kiln export --checkpoint DIR [--format hf] --output DIR
// kiln import [--format hf] --input DIR --output DIR [--seq-len N]
// docs/interchange.md describes both.
void add_interchange_commands(CLI::App& app);

}  // namespace kiln
