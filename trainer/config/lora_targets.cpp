#include "trainer/config/lora_targets.h"

#include <algorithm>
#include <string_view>

#include "base/check.h"
#include "base/closest_word.h"
#include "base/trim.h"

namespace kiln {

const std::vector<std::string>& lora_target_names() {
  static const std::vector<std::string> names = {"q", "k", "v", "o", "gate", "up", "down", "fc"};
  return names;
}

const std::string& lora_target_name(LoraTarget target) {
  return lora_target_names()[static_cast<size_t>(target)];
}

namespace {
bool model_has(const ModelConfig& model, LoraTarget target) {
  if (target == LoraTarget::Fc) return !model.is_llama();
  if (target == LoraTarget::Gate || target == LoraTarget::Up) return model.is_llama();
  return true;
}

std::string targets_of(const ModelConfig& model) {
  std::string list;
  for (size_t i = 0; i < lora_target_names().size(); ++i)
    if (model_has(model, static_cast<LoraTarget>(i))) list += (list.empty() ? "" : ",") + lora_target_names()[i];
  return list;
}
}  // namespace

std::vector<LoraTarget> parse_lora_targets(const std::string& text, const ModelConfig& model) {
  const std::vector<std::string>& names = lora_target_names();
  std::vector<LoraTarget> targets;
  std::string_view rest = text;
  while (!trim_blanks(rest).empty()) {
    const size_t comma = rest.find(',');
    const std::string name(trim_blanks(rest.substr(0, comma)));
    const auto known = std::find(names.begin(), names.end(), name);
    if (known == names.end()) {
      // PEFT's module names (q_proj) are the commonest slip.
      const std::string bare = name.ends_with("_proj") ? name.substr(0, name.size() - 5) : std::string();
      const bool peft = std::find(names.begin(), names.end(), bare) != names.end();
      fail("config: finetune.lora.targets names no layer \"" + name + "\"" +
           did_you_mean(peft ? bare : closest_word(name, names)) + "; arch " + model.arch + " has " + targets_of(model));
    }
    const auto target = static_cast<LoraTarget>(known - names.begin());
    if (!model_has(model, target))
      fail("config: finetune.lora.targets names \"" + name + "\", which arch " + model.arch + " lacks; it has " +
           targets_of(model));
    if (std::find(targets.begin(), targets.end(), target) != targets.end())
      fail("config: finetune.lora.targets names \"" + name + "\" twice");
    targets.push_back(target);
    if (comma == rest.npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (targets.empty()) fail("config: finetune.lora.targets is empty; arch " + model.arch + " has " + targets_of(model));
  return targets;
}

bool adapts(const ModelConfig& model, LoraTarget target) {
  if (!model.lora.enabled()) return false;
  const std::vector<LoraTarget> targets = parse_lora_targets(model.lora.targets, model);
  return std::find(targets.begin(), targets.end(), target) != targets.end();
}

int64_t lora_layer_parameters(const ModelConfig& m) {
  if (!m.lora.enabled()) return 0;
  const int64_t C = m.d_model, F = m.ffn_dim(), Q = int64_t{m.n_head} * m.head_dim();
  const int64_t KV = int64_t{m.kv_heads()} * m.head_dim();
  int64_t widths = 0;  // in + out of each adapted part
  for (LoraTarget t : parse_lora_targets(m.lora.targets, m)) {
    switch (t) {
      case LoraTarget::Q: widths += C + Q; break;
      case LoraTarget::K:
      case LoraTarget::V: widths += C + KV; break;
      case LoraTarget::O: widths += Q + C; break;
      case LoraTarget::Gate:
      case LoraTarget::Up:
      case LoraTarget::Fc: widths += C + F; break;
      case LoraTarget::Down: widths += F + C; break;
    }
  }
  return widths * m.lora.rank;
}

std::string adapter_name(const ModelConfig& model, LoraTarget target) {
  return adapts(model, target) ? lora_target_name(target) : std::string();
}

}  // namespace kiln
