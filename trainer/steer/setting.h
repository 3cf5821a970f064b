// The settings a live run accepts through `kiln runs set RUN key=value`: the keys that can
// change between two steps without rebuilding anything.
//
//   train.lr=3e-4          a new peak: the whole schedule (warmup, decay, min_lr) is rescaled
//                          so its peak is 3e-4; the run continues at the same point of it
//   train.lr_scale=0.5     the schedule times 0.5 (absolute, not cumulative: 1 undoes it)
//   train.log_interval=N   log every N steps from now on
//   train.eval_interval=N  validate every N steps (0: no more validation)
#pragma once

#include <string>
#include <string_view>

namespace kiln {

struct Setting {
  std::string key;  // one of hot_settings()
  double value = 0;
};

// "train.lr=3e-4" -> {train.lr, 3e-4}. An unknown key, or a value that is not a number in
// the key's range, is a kiln::Error whose one line names the key and the reason.
Setting parse_setting(std::string_view assignment);

// The keys parse_setting accepts, comma-separated, for messages and help text.
std::string hot_settings();

}  // namespace kiln
