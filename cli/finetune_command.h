#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace kiln {

// kiln finetune --model DIR|CHECKPOINT --data FILE.jsonl|PREFIX [--recipe FILE] [--name NAME]
//               [--format chat|instruct] [--chat-template FILE] [--prompt TEXT] [--set k=v ...]
// Imports and prepares what needs it, says what it will train and the kiln train command that
// does it, then trains (docs/finetune.md).
void add_finetune_command(CLI::App& app, std::string command_line);

}  // namespace kiln
