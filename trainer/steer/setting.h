// The settings a live run accepts through `kiln runs set RUN key=value`: the keys that can
// change between two steps without rebuilding anything.
//
//   train.lr=3e-4          a new peak: the whole schedule (warmup, decay, min_lr) is rescaled
//                          so its peak is 3e-4; the run continues at the same point of it
//   train.lr_scale=0.5     the schedule times 0.5 (absolute, not cumulative: 1 undoes it)
//   train.log_interval=N   log every N steps from now on
//   train.eval_interval=N  validate every N steps (0: no more validation)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

struct Setting {
  std::string key;  // one of hot_settings()
  double value = 0;
  std::string text;  // the value as typed, for messages: 1e300, not 1e+300
};

// The learning-rate scale a run can hold, whoever sets it (`kiln runs set train.lr=...` or
// train.lr_scale=..., forced or not) and whatever resumes it (a checkpoint's lr_scale): a
// finite number above 0 and at most kMaxLrScale. Past it AdamW's arithmetic overflows; a
// scale a run may take and its checkpoint then refuses would strand the run.
inline constexpr double kMaxLrScale = 1e3;
// "" for a scale a run can hold, else the rule it breaks ("above 0 and at most 1000").
std::string lr_scale_problem(double scale);

// "train.lr=3e-4" -> {train.lr, 3e-4}. An unknown key, or a value that is not a number in
// the key's range, is a kiln::Error whose one line names the key and the reason.
Setting parse_setting(std::string_view assignment);

// The keys parse_setting accepts, comma-separated, for messages and help text.
std::string hot_settings();

// What a live run's setting may sanely become, from the run's own config: a learning rate
// of 1e300 is a number, and the run would die of it two steps later. Unknown (absent from
// the config): only parse_setting's checks apply.
struct SettingLimits {
  std::optional<double> peak_lr;  // train.lr as configured
  std::optional<int64_t> steps;   // train.steps
};
inline constexpr double kMaxLrFactor = 10;
SettingLimits setting_limits(std::string_view run_config_json);

// Refuses a value outside its range, in one line naming the range and ending with
// `force_hint` (how the caller says "anyway"): train.lr at most kMaxLrFactor x the configured
// peak, train.lr_scale at most kMaxLrFactor, either a normal number (a denormal learning rate
// is a typo, and slow), the intervals at most train.steps.
void check_setting_range(const Setting& setting, const SettingLimits& limits, std::string_view force_hint);

// Refuses, forced or not, a learning rate whose scale no run can hold (lr_scale_problem):
// train.lr_scale itself, or train.lr over the run's configured peak when it is known.
void check_setting_holdable(const Setting& setting, const SettingLimits& limits);

// The command argument a steering door (`kiln runs set`, the dashboard's API) queues:
// parsed, held to what a run can hold, range-checked against the run's config unless forced,
// and written back as key=value, so the run reads exactly the number that was checked.
std::string checked_setting(std::string_view assignment, std::string_view run_config_json, bool force,
                            std::string_view force_hint);

}  // namespace kiln
