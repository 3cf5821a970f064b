#pragma once

#include <CLI/CLI.hpp>

namespace kiln {

// kiln generate --checkpoint DIR [--prompt STR] [--max-tokens N] [--temperature T] [--top-k K]
//               [--top-p P] [--seed S] [--tokenizer SPEC] [--device cpu|cuda|auto]
// kiln eval --checkpoint DIR [--data PREFIX] [--iters N] [--split train|valid|test]
//           [--micro-batch B] [--tokenizer SPEC] [--device cpu|cuda|auto]
// docs/generate.md describes both.
void add_generate_commands(CLI::App& app);

}  // namespace kiln
