#include "cli/interchange_command.h"

#include <fmt/core.h>

#include <memory>
#include <string>

#include "cli/inference_model.h"
#include "trainer/interchange/hf_export.h"
#include "trainer/interchange/hf_import.h"

namespace kiln {
namespace {

// hf, the one format there is, unless a command line names it.
struct ExportOptions {
  std::string checkpoint, format = "hf", output;
  bool adapter = false;  // a LoRA checkpoint's adapters as a PEFT folder
  std::string max_shard_size = "5GB";
};

struct ImportOptions {
  HfImportOptions hf;
  std::string format = "hf";
};

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

void run_export(const ExportOptions& o) {
  const int64_t max_shard_bytes = parse_shard_size(o.max_shard_size);
  const std::string checkpoint = checkpoint_argument(o.checkpoint);
  const HfExportSummary s = export_hf(checkpoint, o.output, o.adapter, max_shard_bytes);
  fmt::print("kiln: exported {} ({}, {:.2f}M parameters, {}) to {}: {}\n", s.checkpoint, s.arch,
             static_cast<double>(s.parameters) / 1e6, dtype_name(s.dtype), o.output, join(s.files));
  for (const std::string& note : s.notes) fmt::print("kiln: note: {}\n", note);
  if (!o.adapter && !s.tokenizer)
    fmt::print(
        "kiln: note: the byte tokenizer has no Hugging Face equivalent; no tokenizer files "
        "were written\n");
}

void run_import(const HfImportOptions& o) {
  const HfImportSummary s = import_hf(o);
  fmt::print("kiln: imported {} ({}, {:.2f}M parameters) as {}, run {}, data.tokenizer={}\n",
             o.input, s.arch, static_cast<double>(s.parameters) / 1e6, s.checkpoint, s.run_name,
             s.tokenizer);
  for (const std::string& note : s.notes) fmt::print("kiln: note: {}\n", note);
  fmt::print("kiln: fine-tune with: kiln train --resume {} --set 'data.paths=[\"PREFIX\"]'\n",
             o.output);
}

}  // namespace

void add_interchange_commands(CLI::App& app) {
  auto e = std::make_shared<ExportOptions>();
  CLI::App* exp = app.add_subcommand(
      "export", "Write a checkpoint as a Hugging Face model folder (transformers loads it)");
  add_checkpoint_option(exp, e->checkpoint);
  exp->add_option("--format", e->format, "hf: config.json + model.safetensors + tokenizer files")
      ->check(CLI::IsMember({"hf"}))
      ->capture_default_str();
  exp->add_option("-o,--output", e->output, "The folder to write (created)")->required();
  exp->add_option("--max-shard-size", e->max_shard_size,
                  "The largest weights file (KB, MB, GB, TB); past it the weights are sharded as transformers shards "
                  "them, with model.safetensors.index.json")
      ->capture_default_str();
  exp->add_flag("--adapter", e->adapter,
                "A LoRA checkpoint's adapters as a PEFT folder (adapter_config.json + adapter_model.safetensors) "
                "instead of the weights with them merged in");
  exp->callback([e] { run_export(*e); });

  auto i = std::make_shared<ImportOptions>();
  CLI::App* imp = app.add_subcommand(
      "import", "Turn a Hugging Face model folder into a kiln checkpoint to fine-tune");
  imp->add_option("--format", i->format, "hf: a GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM or "
                  "MixtralForCausalLM folder")
      ->check(CLI::IsMember({"hf"}))
      ->capture_default_str();
  imp->add_option("-i,--input", i->hf.input, "The Hugging Face model folder")->required();
  imp->add_option("-o,--output", i->hf.output, "The checkpoint folder to create")->required();
  imp->add_option("--adapter", i->hf.adapter,
                  "A PEFT LoRA folder (adapter_config.json + adapter_model.safetensors) read onto the base: "
                  "the checkpoint trains its adapters");
  imp->add_option("--seq-len", i->hf.seq_len,
                  "model.seq_len (default: the config's n_positions / max_position_embeddings)");
  imp->callback([i] { run_import(i->hf); });
}

}  // namespace kiln
