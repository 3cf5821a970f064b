#include "trainer/interchange/lora_import.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <tuple>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "trainer/interchange/lora_tensors.h"
#include "trainer/memory/host_copy.h"

namespace kiln {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A field PEFT leaves at its default when kiln computes the adapter: absent, null, false, or
// an empty object or list.
bool at_default(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() || (it->is_boolean() && !it->get<bool>()) ||
         ((it->is_object() || it->is_array()) && it->empty());
}

std::string adapter_file(const std::string& dir) { return (fs::path(dir) / "adapter_model.safetensors").string(); }

}  // namespace

LoraConfig read_peft_config(const json& j, const std::string& path, const ModelConfig& model) {
  const std::string where = "import: " + path;
  if (!j.is_object()) fail(where + " is not a JSON object");
  if (j.value("peft_type", json()) != "LORA")
    fail(where + ": peft_type is " + j.value("peft_type", json()).dump() + ", not \"LORA\"");
  if (!model.is_llama())
    fail(where + ": PEFT adapts GPT-2's fused c_attn whole, which kiln's per-part adapters cannot hold");
  for (const char* key : {"use_rslora", "use_dora", "fan_in_fan_out", "rank_pattern", "alpha_pattern",
                          "layers_to_transform", "layers_pattern", "modules_to_save"})
    if (!at_default(j, key))
      fail(where + ": " + key + " is " + j[key].dump() + ", which kiln's adapters do not compute");
  if (j.value("bias", json("none")) != "none")
    fail(where + ": bias is " + j["bias"].dump() + "; kiln's adapters train no biases (\"none\")");
  LoraConfig lora;
  if (!j.contains("r") || !j["r"].is_number_integer() || j["r"].get<int>() <= 0)
    fail(where + ": r must be a positive integer, got " + j.value("r", json()).dump());
  lora.rank = j["r"].get<int>();
  const json alpha = j.value("lora_alpha", json(8));
  if (!alpha.is_number() || !(alpha.get<double>() > 0))
    fail(where + ": lora_alpha must be a number above 0, got " + alpha.dump());
  lora.alpha = alpha.get<double>();
  // Training goes on with the adapter's own dropout, as PEFT's would.
  const json dropout = j.value("lora_dropout", json(0.0));
  if (!dropout.is_number() || !(dropout.get<double>() >= 0 && dropout.get<double>() < 1))
    fail(where + ": lora_dropout must be a number in [0, 1), got " + dropout.dump());
  lora.dropout = dropout.get<double>();
  const json modules = j.value("target_modules", json());
  lora.targets.clear();
  if (!modules.is_array() || modules.empty())
    fail(where + ": target_modules must be a list of module names (q_proj, ...), got " + modules.dump());
  for (const json& module : modules) {
    const std::string name = module.is_string() ? module.get<std::string>() : module.dump();
    std::string target;
    for (size_t i = 0; i < lora_target_names().size(); ++i)
      if (static_cast<LoraTarget>(i) != LoraTarget::Fc && peft_module_name(static_cast<LoraTarget>(i)) == name)
        target = lora_target_names()[i];
    if (target.empty())
      fail(where + ": target_modules names " + name + ", which kiln has no adapter for (q_proj, k_proj, v_proj, "
           "o_proj, gate_proj, up_proj, down_proj)");
    lora.targets += (lora.targets.empty() ? "" : ",") + target;
  }
  return lora;
}

PeftAdapterTensors::PeftAdapterTensors(const std::string& dir, const ModelConfig& model) : file_(adapter_file(dir)) {
  std::set<std::string> used;
  for (const LoraSite& site : lora_sites(model)) {
    const int64_t r = model.lora.rank;
    for (const auto& [kiln, peft, shape] :
         {std::tuple{site.adapter + ".lora_a", "base_model.model." + site.module + ".lora_A.weight", Shape{r, site.in}},
          std::tuple{site.adapter + ".lora_b", "base_model.model." + site.module + ".lora_B.weight", Shape{site.out, r}}}) {
      if (!file_.contains(peft)) fail("import: " + file_.path() + " has no tensor " + peft);
      const TensorInfo& info = file_.info(peft);
      if (!(info.shape == shape))
        fail("import: " + peft + " is " + info.shape.str() + " in " + file_.path() + "; r and the model say " + shape.str());
      if (info.dtype != DType::F32 && info.dtype != DType::F64 && info.dtype != DType::BF16 && info.dtype != DType::F16)
        fail("import: " + peft + " in " + file_.path() + " is " + dtype_name(info.dtype) + ", not a floating dtype");
      entries_.push_back({kiln, peft, shape});
      used.insert(peft);
    }
  }
  for (const TensorInfo& t : file_.tensors())
    if (!used.count(t.name))
      fail("import: " + file_.path() + " holds " + t.name + ", which the adapter_config.json's target_modules do not name");
}

std::vector<TensorSource> PeftAdapterTensors::sources() const {
  std::vector<TensorSource> out;
  for (const Entry& e : entries_)
    out.push_back({{e.kiln_name, DType::F32, e.shape}, [this, &e](void* host) {
                     const TensorInfo& info = file_.info(e.peft_name);
                     const std::vector<double> values =
                         doubles_from_bytes(file_.data(e.peft_name).data(), info.dtype, e.shape.numel());
                     std::transform(values.begin(), values.end(), static_cast<float*>(host),
                                    [](double v) { return static_cast<float>(v); });
                   }});
  return out;
}

int64_t PeftAdapterTensors::parameters() const {
  int64_t n = 0;
  for (const Entry& e : entries_) n += e.shape.numel();
  return n;
}

}  // namespace kiln
