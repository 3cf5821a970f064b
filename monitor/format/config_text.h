// A run's recorded config (RunRecord::config_json) as text: what it says at a glance, and a
// value of it as people read it. The config is read leniently: a key it lacks is left out,
// text that is not JSON gives nothing, since a run's record must stay readable whatever kiln
// version wrote it.
#pragma once

#include <optional>
#include <string>

namespace kiln {

// One line: "gpt2, 4 layers, d_model 128, 4 heads, seq_len 128, vocab 257; 1000 steps,
// batch 32 (micro 32), lr 0.003". Empty when the config holds none of these keys.
std::string config_summary(const std::string& config_json);

// One value of a config difference (store::ConfigDifference, JSON text): strings without
// their quotes, "-" when the config lacks the key.
std::string config_value(const std::optional<std::string>& json_text);

}  // namespace kiln
