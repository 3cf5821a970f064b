// `kiln import --format hf`: a Hugging Face model directory (config.json and
// model.safetensors, or model.safetensors.index.json and its shards) as a kiln checkpoint
// at step 0 with zero optimizer moments, ready for `kiln train --resume OUTPUT --set ...`.
//
//   OUTPUT/step-00000000/   the checkpoint: the weights in their dtype when all share one of
//                           F32, BF16, F16 (else widened to F32; F32 under --adapter)
//   OUTPUT/latest           naming it, so OUTPUT itself is what --resume takes
//   OUTPUT/tokenizer/       the directory's vocab.json + merges.txt or tokenizer.json, which
//                           data.tokenizer names (by absolute path); without them, byte
//
// With an adapter, the checkpoint is a LoRA run's: the base frozen, the adapters and their
// (zero) moments, finetune.lora from the adapter's config.
//
// The run it resumes is named after OUTPUT's last component. Unknown model types, tensors
// that are missing or of the wrong shape, and tensors kiln has no place for are refused in
// one line naming the tensor, before anything is written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct HfImportOptions {
  std::string input;
  std::string output;  // must not exist yet, or be empty
  int seq_len = 0;     // model.seq_len; 0: the config's n_positions / max_position_embeddings
  std::string adapter{};  // a PEFT LoRA folder read onto the base (lora_import.h); empty: none
};

struct HfImportSummary {
  std::string checkpoint;  // the checkpoint folder written
  std::string run_name;
  std::string arch;
  int64_t parameters = 0;
  std::string tokenizer;           // data.tokenizer of the checkpoint
  std::vector<std::string> notes;  // what the user should know (a tokenizer kiln cannot read)
};

HfImportSummary import_hf(const HfImportOptions& options);

}  // namespace kiln
