// A PEFT adapter folder (adapter_config.json + adapter_model.safetensors, as kiln export
// --adapter writes it) copied with one key of its config changed: what PEFT, or kiln's import,
// would read otherwise or refuse.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace kiln::test {

// The copy of `peft` at its sibling folder PEFT_KEY (made or replaced), with `key` set to `value`.
inline std::filesystem::path peft_folder_with(const std::filesystem::path& peft, const std::string& key,
                                              const nlohmann::json& value) {
  namespace fs = std::filesystem;
  nlohmann::json config;
  std::ifstream(peft / "adapter_config.json") >> config;
  config[key] = value;
  const fs::path changed = peft.parent_path() / (peft.filename().string() + "_" + key);
  fs::create_directories(changed);
  fs::copy_file(peft / "adapter_model.safetensors", changed / "adapter_model.safetensors",
                fs::copy_options::overwrite_existing);
  std::ofstream(changed / "adapter_config.json") << config.dump();
  return changed;
}

}  // namespace kiln::test
