// `kiln import --adapter DIR` (docs/lora.md#export-and-import): a PEFT LoRA folder
// (adapter_config.json + adapter_model.safetensors) read onto the imported base, its
// adapters under kiln's names and its settings as finetune.lora.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/config.h"

namespace kiln {

// finetune.lora from an adapter_config.json (read from `path`) for `model`; refuses in one line
// what kiln does not compute (another peft_type, rslora, DoRA, fan_in_fan_out, a bias,
// per-layer ranks or layers, a module it has no target for, a lora_dropout outside [0, 1)).
LoraConfig read_peft_config(const nlohmann::json& j, const std::string& path, const ModelConfig& model);

// The adapters of DIR/adapter_model.safetensors as F32 kiln tensors for `model` (whose lora
// is read_peft_config's), each checked present and of its shape, none left over.
class PeftAdapterTensors {
 public:
  PeftAdapterTensors(const std::string& dir, const ModelConfig& model);
  // One source per kiln tensor, in lora_sites order (valid while this object lives).
  std::vector<TensorSource> sources() const;
  int64_t parameters() const;

 private:
  SafetensorsFile file_;
  struct Entry {
    std::string kiln_name, peft_name;
    Shape shape;
  };
  std::vector<Entry> entries_;
};

}  // namespace kiln
