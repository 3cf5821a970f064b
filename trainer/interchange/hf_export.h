// `kiln export --format hf`: a checkpoint as a Hugging Face model directory that
// transformers' class for it (GPT2LMHeadModel, LlamaForCausalLM, ..., DeepseekV3ForCausalLM)
// loads with from_pretrained:
//   config.json          its config class's fields (hf_config.h)
//   model.safetensors    every weight under its Hugging Face name and layout (hf_tensors.h),
//                        in the checkpoint's dtype, vocabulary padding removed, a LoRA
//                        checkpoint's adapters merged in (lora_export.h); DeepseekV3's
//                        e_score_correction_bias, from the checkpoint's selection bias, in
//                        F32; or, past the largest shard size,
//                        model-0000i-of-0000N.safetensors and
//                        model.safetensors.index.json (hf_shards.h)
//   vocab.json, merges.txt or tokenizer.json, and tokenizer_config.json, when
//                        data.tokenizer names files (hf_tokenizer.h)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/tensor.h"
#include "trainer/interchange/hf_shards.h"

namespace kiln {

struct HfExportSummary {
  std::string checkpoint;  // the checkpoint folder exported
  std::string arch;        // gpt2 | llama
  DType dtype = DType::F32;
  int64_t tensors = 0;             // in model.safetensors or its shards
  int64_t parameters = 0;          // values in them
  std::vector<std::string> files;  // written into the output directory
  bool tokenizer = false;          // whether tokenizer files were among them
  std::vector<std::string> notes;  // what the user should know (what a Hugging Face model leaves out)
};

// Exports the checkpoint folder (checked against its manifest first) into output, creating it,
// its weights in files of at most max_shard_bytes (hf_shards.h); adapter: a LoRA checkpoint's
// adapters alone, as a PEFT folder (lora_export.h).
HfExportSummary export_hf(const std::string& checkpoint_path, const std::string& output, bool adapter = false,
                          int64_t max_shard_bytes = kHfMaxShardBytes);

}  // namespace kiln
