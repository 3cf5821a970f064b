#include "trainer/interchange/lora_export.h"

#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/check.h"
#include "kernels/half_convert.h"
#include "trainer/checkpoint/durable_file.h"
#include "trainer/interchange/lora_tensors.h"
#include "trainer/memory/host_copy.h"

namespace kiln {

namespace {

namespace fs = std::filesystem;

std::vector<double> saved_doubles(const SafetensorsFile& file, const std::string& name) {
  const TensorInfo& info = file.info(name);
  return doubles_from_bytes(file.data(name).data(), info.dtype, info.shape.numel());
}

// values rounded to dtype, as bytes.
std::vector<std::byte> bytes_of(const std::vector<double>& values, DType dtype) {
  std::vector<std::byte> out(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    std::byte* at = out.data() + i * dtype_size(dtype);
    const auto f = static_cast<float>(values[i]);
    if (dtype == DType::F64) std::memcpy(at, &values[i], 8);
    else if (dtype == DType::F32) std::memcpy(at, &f, 4);
    else if (dtype == DType::BF16) { const uint16_t h = float_to_bf16(f); std::memcpy(at, &h, 2); }
    else if (dtype == DType::F16) { const uint16_t h = float_to_f16(f); std::memcpy(at, &h, 2); }
    else fail(std::string("export: cannot write a merged weight as ") + dtype_name(dtype));
  }
  return out;
}
}  // namespace

const std::byte* lora_merged_weight(const SafetensorsFile& weights, const ModelConfig& model,
                                    const std::string& name, std::vector<std::byte>& merged) {
  std::vector<LoraSite> sites;
  for (const LoraSite& site : lora_sites(model))
    if (site.weight == name) sites.push_back(site);
  if (sites.empty()) return weights.data(name).data();
  std::vector<double> w = saved_doubles(weights, name);
  std::vector<std::vector<double>> a, b;
  for (const LoraSite& site : sites) {
    a.push_back(saved_doubles(weights, site.adapter + ".lora_a"));
    b.push_back(saved_doubles(weights, site.adapter + ".lora_b"));
  }
  merge_lora(w, sites, a, b, model.lora.scale());
  merged = bytes_of(w, weights.info(name).dtype);
  return merged.data();
}

HfExportSummary write_peft_adapter(const SafetensorsFile& weights, const ModelConfig& m, const std::string& output,
                                   HfExportSummary summary) {
  summary.arch = m.arch;
  if (!m.lora.enabled())
    fail("export: " + summary.checkpoint + " holds no LoRA adapters (finetune.lora.rank is 0); export it without --adapter");
  if (!m.is_llama())
    fail("export: PEFT adapts GPT-2's fused c_attn whole, which kiln's per-part adapters cannot match; export " +
         summary.checkpoint + " without --adapter to merge them into the weights");
  const std::vector<LoraSite> sites = lora_sites(m);
  summary.dtype = weights.info(sites.front().adapter + ".lora_a").dtype;

  nlohmann::json modules = nlohmann::json::array();
  for (LoraTarget target : parse_lora_targets(m.lora.targets, m)) modules.push_back(peft_module_name(target));
  const nlohmann::json adapter_config = {
      {"peft_type", "LORA"},      {"task_type", "CAUSAL_LM"},     {"r", m.lora.rank},
      {"lora_alpha", m.lora.alpha}, {"lora_dropout", m.lora.dropout}, {"target_modules", modules},
      {"bias", "none"},           {"fan_in_fan_out", false},      {"use_rslora", false},
      {"use_dora", false},        {"inference_mode", true},       {"modules_to_save", nullptr},
      {"layers_to_transform", nullptr}, {"rank_pattern", nlohmann::json::object()},
      {"alpha_pattern", nlohmann::json::object()}, {"base_model_name_or_path", nullptr}};
  fs::create_directories(output);
  write_file_atomically((fs::path(output) / "adapter_config.json").string(), adapter_config.dump(2) + "\n");
  summary.files.push_back("adapter_config.json");

  std::vector<TensorInfo> infos;
  for (const LoraSite& site : sites)
    for (const char* factor : {"a", "b"}) {
      const TensorInfo& saved = weights.info(site.adapter + ".lora_" + factor);
      infos.push_back({"base_model.model." + site.module + ".lora_" + (factor[0] == 'a' ? "A" : "B") + ".weight",
                       saved.dtype, saved.shape});
      summary.parameters += saved.shape.numel();
    }
  summary.tensors = static_cast<int64_t>(infos.size());
  SafetensorsWriter writer((fs::path(output) / "adapter_model.safetensors").string(), infos, {{"format", "pt"}});
  for (const LoraSite& site : sites)
    for (const char* factor : {".lora_a", ".lora_b"}) {
      const auto bytes = weights.data(site.adapter + factor);
      writer.write_tensor(bytes.data(), bytes.size());
    }
  writer.close();
  summary.files.push_back("adapter_model.safetensors");
  return summary;
}

}  // namespace kiln
