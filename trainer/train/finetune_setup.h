// `kiln finetune` before it trains: the base model (a Hugging Face folder, imported first, or
// the checkpoint of an import), the conversations (a JSONL file, prepared here with the base's
// tokenizer and chat template, or a dataset already prepared) and a recipe (a JSON file of the
// settings a fine-tune changes, configs/finetune-*.json) become the `kiln train --resume` it
// runs: the checkpoint and the --set overrides. docs/finetune.md.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "trainer/data/chat_encoder.h"

namespace kiln {

struct FinetuneRequest {
  std::string model;   // a Hugging Face model folder, or a checkpoint of `kiln import`
  std::string data;    // a JSONL file of conversations, or a prepared dataset's PREFIX
  std::string recipe;  // a JSON config file whose settings go on top of the base's; "": none
  std::string name = "finetune";  // the run's; the import and the prepared data are named after it
  std::string checkpoint_dir = "checkpoints";
  ChatDataOptions chat;  // format chat or instruct, --chat-template, the keys
  std::vector<std::string> prompts;  // user messages whose replies are sampled at each evaluation
  std::vector<std::string> overrides;  // --set, last
};

struct FinetunePlan {
  std::string checkpoint;              // what --resume takes
  std::vector<std::string> overrides;  // the recipe's, the data's, then the request's
  std::vector<std::string> lines;      // what it will train, said before it starts
};

// A recipe's settings as --set overrides: {"train": {"lr": 1e-4}} is train.lr=0.0001; a
// kiln::Error in one line for a file that is not a JSON object of sections of settings.
std::vector<std::string> recipe_overrides(const std::string& path);

// Imports and prepares what needs it (saying so on `progress`). A kiln::Error in one line for
// a base that is not at step 0 (a run's checkpoint: its export is a base), a recipe that is not
// a JSON object of sections, data that is neither a file nor a dataset.
FinetunePlan plan_finetune(const FinetuneRequest& request, std::FILE* progress);

}  // namespace kiln
