#include "cli/finetune_command.h"

#include <fmt/core.h>

#include <memory>

#include "cli/next_steps.h"
#include "cli/train_command.h"
#include "trainer/train/finetune_setup.h"

namespace kiln {
namespace {

struct FinetuneOptions {
  FinetuneRequest request;
  TrainOptions train;
};

void run_finetune(FinetuneOptions& options, const std::string& command_line) {
  const FinetuneRequest& request = options.request;
  const FinetunePlan plan = plan_finetune(request, stdout);
  TrainOptions train = options.train;
  train.name = request.name;
  train.resume = plan.checkpoint;
  train.overrides = plan.overrides;
  std::string same = "kiln train --resume " + shell_quote(plan.checkpoint) + " --name " + shell_quote(train.name);
  for (const std::string& o : plan.overrides) same += " --set " + shell_quote(o);
  for (const std::string& line : plan.lines) fmt::print("kiln finetune: {}\n", line);
  fmt::print("kiln finetune: the same as: {}\n", same);
  std::fflush(stdout);
  run_train(train, command_line);
}

}  // namespace

void add_finetune_command(CLI::App& app, std::string command_line) {
  auto options = std::make_shared<FinetuneOptions>();
  FinetuneRequest& r = options->request;
  CLI::App* cmd = app.add_subcommand(
      "finetune", "Fine-tune a model on conversations: import, prepare, train (docs/finetune.md)");
  cmd->add_option("-m,--model", r.model,
                  "The base: a Hugging Face model folder (imported first), or a checkpoint of kiln import")
      ->required();
  cmd->add_option("-d,--data", r.data,
                  "Conversations: a JSONL file (prepared with the base's tokenizer and chat template) or a "
                  "prepared dataset's PREFIX")
      ->required();
  cmd->add_option("-r,--recipe", r.recipe,
                  "A JSON config of the settings the fine-tune changes (configs/finetune-full.json, "
                  "configs/finetune-lora.json)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--name", r.name,
                  "The run's name; its import and data are CHECKPOINT_DIR/NAME-base and NAME-data")
      ->capture_default_str();
  cmd->add_option("--checkpoint-dir", r.checkpoint_dir, "Where the import, the data and the run's checkpoints go")
      ->capture_default_str();
  cmd->add_option("--format", r.chat.format, "The JSONL: chat (messages) or instruct (prompt/response)")
      ->check(CLI::IsMember({"chat", "instruct"}))
      ->default_str("chat");
  r.chat.format = "chat";
  cmd->add_option("--chat-template", r.chat.chat_template_file,
                  "A Jinja chat template file to use instead of the base's tokenizer_config.json");
  cmd->add_option("--prompt", r.prompts,
                  "A user message whose reply is sampled at each evaluation; give it again for more (up to 16)");
  cmd->add_option("--set", r.overrides, "Override a config key: section.key=value, after the recipe")
      ->take_all()
      ->allow_extra_args(false);
  CLI::Option* store = cmd->add_option("--store", options->train.store,
                                       "Run store file (default: $KILN_STORE, else store.path, else ./kiln-runs.db)");
  cmd->add_flag("--no-store", options->train.no_store, "Do not record the run in a store")->excludes(store);
  cmd->callback([options, command_line] { run_finetune(*options, command_line); });
}

}  // namespace kiln
