#include "trainer/interchange/hf_export.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/core.h>

#include "base/check.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/durable_file.h"
#include "trainer/interchange/hf_config.h"
#include "trainer/interchange/hf_tensors.h"
#include "trainer/interchange/hf_tokenizer.h"
#include "trainer/interchange/lora_export.h"

namespace kiln {

namespace fs = std::filesystem;

HfExportSummary export_hf(const std::string& checkpoint_path, const std::string& output, bool adapter,
                          int64_t max_shard_bytes) {
  HfExportSummary summary;
  summary.checkpoint = checkpoint_path;
  const Checkpoint checkpoint(checkpoint_path);
  const Config config = config_from_json(checkpoint.state().config);
  const ModelConfig& m = config.model;
  if (adapter) return write_peft_adapter(checkpoint.model_file(), m, output, summary);
  // Aux-loss-free balancing's selection bias chooses experts; DeepseekV3's router holds it
  // (e_score_correction_bias), Mixtral's and Qwen3-MoE's have none.
  const std::map<int, std::string> bias_names = hf_selection_bias_names(m);
  const std::map<int, std::vector<double>>& expert_bias = checkpoint.state().expert_bias;
  if (bias_names.empty())
    for (const auto& [layer, bias] : expert_bias)
      for (double b : bias)
        if (b != 0)
          fail(fmt::format("export: {} chooses layer {}'s experts with a selection bias "
                           "(moe.bias_update_rate), which {}'s router cannot hold",
                           checkpoint_path, layer,
                           exports_as_qwen3_moe(m) ? "Qwen3MoeForCausalLM" : "MixtralForCausalLM"));
  // Generation reads the main head alone; transformers' classes have no modules to hold them.
  // A DeepseekV3 file keeps them as DeepSeek's checkpoints do, in layers past its own, which
  // transformers skips on loading.
  if (m.mtp_depth > 0 && !exports_as_deepseek_v3(m))
    summary.notes.push_back(fmt::format("left out the model.mtp_depth={} multi-token prediction modules: a Hugging "
                                        "Face causal language model has none to hold them",
                                        m.mtp_depth));
  const SafetensorsFile& weights = checkpoint.model_file();
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(config.data.tokenizer);
  summary.arch = m.arch;
  summary.dtype = weights.info("wte").dtype;
  const nlohmann::json hf = hf_config(m, summary.dtype, tokenizer->eod());

  fs::create_directories(output);
  write_file_atomically((fs::path(output) / "config.json").string(), hf.dump(2) + "\n");
  summary.files.push_back("config.json");

  const std::vector<HfTensor> map = hf_tensor_map(m);
  std::vector<TensorInfo> infos;
  // Of each entry of infos: a part of a kiln tensor, or (null) a layer's selection bias.
  std::vector<std::pair<const HfTensor*, const HfPart*>> parts;
  std::vector<int> bias_layer;
  for (const HfTensor& t : map) {
    const TensorInfo& saved = weights.info(t.kiln_name);
    if (!(saved.shape == t.kiln_shape) || saved.dtype != summary.dtype)
      fail("export: " + t.kiln_name + " is " + saved.shape.str() + " " + dtype_name(saved.dtype) +
           " in " + weights.path() + ", not " + t.kiln_shape.str() + " " +
           dtype_name(summary.dtype));
    for (const HfPart& p : t.parts) {
      infos.push_back({p.name, summary.dtype, hf_shape(t, p)});
      parts.emplace_back(&t, &p);
      bias_layer.push_back(-1);
      if (!t.copy) summary.parameters += infos.back().shape.numel();
    }
  }
  // F32 whatever the weights' dtype: the routers pick their experts by it in F32.
  for (const auto& [layer, name] : bias_names) {
    infos.push_back({name, DType::F32, {m.moe.num_experts}});
    parts.emplace_back(nullptr, nullptr);
    bias_layer.push_back(layer);
    summary.parameters += m.moe.num_experts;
  }
  summary.tensors = static_cast<int64_t>(infos.size());
  const size_t element = dtype_size(summary.dtype);
  const std::vector<HfShard> shards = plan_hf_shards(infos, max_shard_bytes);
  std::vector<std::byte> part, merged;
  const HfTensor* merged_of = nullptr;  // the kiln tensor `merged` holds
  const std::byte* kiln = nullptr;
  for (const HfShard& shard : shards) {
    std::vector<TensorInfo> shard_infos;
    for (size_t i : shard.tensors) shard_infos.push_back(infos[i]);
    // transformers refuses a safetensors file whose metadata does not say format "pt".
    SafetensorsWriter writer((fs::path(output) / shard.file).string(), shard_infos, {{"format", "pt"}});
    for (size_t i : shard.tensors) {
      const auto [t, p] = parts[i];
      if (!t) {  // a selection bias; none saved is none at all
        const auto saved = expert_bias.find(bias_layer[i]);
        std::vector<float> values(static_cast<size_t>(m.moe.num_experts), 0.0f);
        if (saved != expert_bias.end()) {
          if (saved->second.size() != values.size())
            fail(fmt::format("export: {} holds a selection bias of {} experts for layer {}, which has {}",
                             checkpoint_path, saved->second.size(), bias_layer[i], values.size()));
          std::copy(saved->second.begin(), saved->second.end(), values.begin());
        }
        writer.write_tensor(values.data(), values.size() * sizeof(float));
        continue;
      }
      // A LoRA checkpoint's adapters merge into the weights they adapt.
      if (t != merged_of) kiln = lora_merged_weight(weights, m, t->kiln_name, merged);
      merged_of = t;
      part.resize(static_cast<size_t>(infos[i].shape.numel()) * element);
      copy_part_out(kiln, *t, *p, element, part.data());
      writer.write_tensor(part.data(), part.size());
    }
    writer.close();
    summary.files.push_back(shard.file);
  }
  if (shards.size() > 1) {
    write_file_atomically((fs::path(output) / "model.safetensors.index.json").string(), hf_shard_index(infos, shards));
    summary.files.push_back("model.safetensors.index.json");
  }

  for (const std::string& name :
       write_hf_tokenizer(config.data.tokenizer, *tokenizer, m.seq_len, output)) {
    summary.files.push_back(name);
    summary.tokenizer = true;
  }
  return summary;
}

}  // namespace kiln
