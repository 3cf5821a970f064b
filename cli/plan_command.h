#pragma once

#include <CLI/CLI.hpp>

namespace kiln {

// kiln plan [--config C] [--gpus N] [--gpu h100|h200|a100|a100-40gb|cpu] [--nodes K]
//           [--profile FILE] [--top K] [--json] [--set section.key=value ...]
// docs/planner.md describes it.
void add_plan_command(CLI::App& app);

}  // namespace kiln
