// What a run's recorded config (RunRecord::config_json) says at a glance. The config is
// read leniently: a key it lacks is left out, text that is not JSON gives nothing, since a
// run's record must stay readable whatever kiln version wrote it.
#pragma once

#include <string>

namespace kiln {

// One line: "gpt2, 4 layers, d_model 128, 4 heads, seq_len 128, vocab 257; 1000 steps,
// batch 32 (micro 32), lr 0.003". Empty when the config holds none of these keys.
std::string config_summary(const std::string& config_json);

}  // namespace kiln
