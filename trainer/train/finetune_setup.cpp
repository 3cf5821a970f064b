#include "trainer/train/finetune_setup.h"

#include <fmt/core.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/private_files.h"
#include "base/run_names.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/config.h"
#include "trainer/data/data_prepare.h"
#include "trainer/data/tokenizer.h"
#include "trainer/interchange/hf_import.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kMaxRecipeBytes = size_t{1} << 20;

// The base as a checkpoint at step 0: a Hugging Face folder is imported (once: a second
// fine-tune of the same name takes the import there); a checkpoint must be an import's.
std::string base_checkpoint(const FinetuneRequest& request, std::FILE* progress, std::vector<std::string>& lines) {
  std::error_code ec;
  if (fs::exists(fs::path(request.model) / "config.json", ec)) {
    const std::string imported = (fs::path(request.checkpoint_dir) / (request.name + "-base")).string();
    if (!fs::exists(imported, ec)) {
      HfImportOptions import;
      import.input = request.model;
      import.output = imported;
      const HfImportSummary summary = import_hf(import);
      fmt::print(progress, "kiln finetune: imported {} ({}, {} parameters) as {}\n", request.model, summary.arch,
                 summary.parameters, summary.checkpoint);
      for (const std::string& note : summary.notes) fmt::print(progress, "kiln finetune: {}\n", note);
    }
    lines.push_back("base: " + request.model + " (imported at " + imported + ")");
    return find_checkpoint_to_resume(imported, request.checkpoint_dir);
  }
  const std::string checkpoint = find_checkpoint_to_resume(request.model, request.checkpoint_dir);
  const TrainingState state = checkpoint_state(checkpoint);
  if (state.step != 0)
    fail(fmt::format("finetune: {} is step {} of run {}; a fine-tune starts from a model, not a run: export it "
                     "(kiln export --checkpoint {} -o DIR) and give --model DIR, or continue the run with kiln train "
                     "--resume",
                     checkpoint, state.step, state.run_name, checkpoint));
  lines.push_back("base: " + checkpoint);
  return checkpoint;
}

// The data as a dataset prefix: a JSONL file is prepared with the base's tokenizer and template.
std::string data_prefix(const FinetuneRequest& request, const std::string& tokenizer, std::FILE* progress,
                        std::vector<std::string>& lines) {
  std::error_code ec;
  if (fs::exists(request.data + ".idx", ec)) {
    lines.push_back("data: " + request.data + " (prepared)");
    return request.data;
  }
  if (!fs::is_regular_file(request.data, ec))
    fail("finetune: --data " + request.data + " is neither a JSONL file of conversations nor a prepared dataset (" +
         request.data + ".idx)");
  DataPrepareOptions prepare;
  prepare.inputs = {request.data};
  prepare.tokenizer = tokenizer;
  prepare.output = (fs::path(request.checkpoint_dir) / (request.name + "-data") / "conversations").string();
  prepare.chat = request.chat;
  const DataPrepareSummary summary = prepare_dataset(prepare, progress, {});
  lines.push_back(fmt::format("data: {} conversations of {}, {} tokens, {} trained ({:.1f}%: the replies) -> {}",
                              summary.documents, request.data, summary.tokens, summary.trained_tokens,
                              100.0 * static_cast<double>(summary.trained_tokens) /
                                  static_cast<double>(std::max<int64_t>(summary.tokens, 1)),
                              prepare.output));
  lines.push_back("chat template: " + summary.chat_template);
  return prepare.output;
}

// Settings under `prefix`; a nested object's keys nest in the name (finetune.lora.rank).
void add_settings(const std::string& prefix, const json& keys, std::vector<std::string>& out) {
  for (const auto& [key, value] : keys.items()) {
    if (value.is_object()) {
      add_settings(prefix + "." + key, value, out);
    } else {
      out.push_back(prefix + "." + key + "=" + (value.is_string() ? value.get<std::string>() : value.dump()));
    }
  }
}

}  // namespace

std::vector<std::string> recipe_overrides(const std::string& path) {
  if (path.empty()) return {};
  const json recipe = json::parse(read_small_file(path, kMaxRecipeBytes, true, "recipe"), nullptr, false);
  if (!recipe.is_object()) fail("finetune: the recipe " + path + " is not a JSON object of config sections");
  std::vector<std::string> out;
  for (const auto& [section, keys] : recipe.items()) {
    if (!keys.is_object())
      fail("finetune: the recipe " + path + "'s \"" + section + "\" is not an object of settings");
    add_settings(section, keys, out);
  }
  return out;
}

FinetunePlan plan_finetune(const FinetuneRequest& request, std::FILE* progress) {
  check_run_name(request.name);
  FinetunePlan plan;
  plan.overrides = recipe_overrides(request.recipe);
  plan.checkpoint = base_checkpoint(request, progress, plan.lines);
  const Config base = resumed_config(plan.checkpoint, {}).config;
  const std::string prefix = data_prefix(request, base.data.tokenizer, progress, plan.lines);
  plan.overrides.push_back("data.paths=" + json::array({prefix}).dump());
  plan.overrides.push_back("train.checkpoint_dir=" + request.checkpoint_dir);
  if (!request.prompts.empty()) {
    const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(base.data.tokenizer);
    const ChatEncoder chat(request.chat, base.data.tokenizer, *tokenizer);
    json prompts = json::array();
    for (const std::string& message : request.prompts) {
      prompts.push_back(chat.reply_prompt(message));
      plan.lines.push_back("sampled at each evaluation: the reply to " + json(message).dump());
    }
    plan.overrides.push_back("train.sample_prompt=" + prompts.dump());
  }
  for (const std::string& o : request.overrides) plan.overrides.push_back(o);
  if (!request.recipe.empty()) plan.lines.push_back("recipe: " + request.recipe);
  return plan;
}

}  // namespace kiln
