// `kiln export` of a LoRA checkpoint (docs/lora.md#export-and-import): the adapters merged
// into the base weights export_hf writes, or, with --adapter, a PEFT adapter folder:
//   adapter_config.json        peft_type LORA, r, lora_alpha, target_modules, ...
//   adapter_model.safetensors  base_model.model.<module>.lora_A.weight [r, in] and
//                              .lora_B.weight [out, r], in the checkpoint's dtype
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "trainer/checkpoint/safetensors.h"
#include "trainer/config/config.h"
#include "trainer/interchange/hf_export.h"

namespace kiln {

// The bytes of kiln tensor `name` of `weights` as export writes them: the saved ones, or, for
// a weight adapters adapt, W + scale B A computed in double and rounded once to the saved dtype
// (into `merged`, which the result then points into).
const std::byte* lora_merged_weight(const SafetensorsFile& weights, const ModelConfig& model,
                                    const std::string& name, std::vector<std::byte>& merged);

// The adapters of a LoRA checkpoint's weights as a PEFT folder in output (created), added to
// summary (export_hf with adapter).
HfExportSummary write_peft_adapter(const SafetensorsFile& weights, const ModelConfig& model, const std::string& output,
                                   HfExportSummary summary);

}  // namespace kiln
