#include "trainer/steer/setting.h"

#include <gtest/gtest.h>

#include <limits>

#include "base/check.h"
#include "tests/error_of.h"

namespace kiln {
namespace {

std::string setting_error_of(std::string_view assignment) {
  try {
    parse_setting(assignment);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Setting, ParsesEveryHotKey) {
  EXPECT_EQ(parse_setting("train.lr=3e-4").key, "train.lr");
  EXPECT_DOUBLE_EQ(parse_setting("train.lr=3e-4").value, 3e-4);
  EXPECT_DOUBLE_EQ(parse_setting("train.lr_scale=0.5").value, 0.5);
  EXPECT_DOUBLE_EQ(parse_setting(" train.log_interval = 5 ").value, 5);
  EXPECT_DOUBLE_EQ(parse_setting("train.eval_interval=0").value, 0);
}

TEST(Setting, RefusesWhatCannotChangeWithTheReason) {
  EXPECT_EQ(setting_error_of("model.n_layer=4"),
            "model.n_layer cannot change during a run; the keys that can are train.lr, "
            "train.lr_scale, train.log_interval, train.eval_interval");
  EXPECT_EQ(setting_error_of("train.lr"), "setting 'train.lr' is not key=value (keys: train.lr, "
                                  "train.lr_scale, train.log_interval, train.eval_interval)");
  EXPECT_EQ(setting_error_of("train.lr=fast"), "train.lr: 'fast' is not a number");
  EXPECT_EQ(setting_error_of("train.lr=1e-3x"), "train.lr: '1e-3x' is not a number");
  EXPECT_EQ(setting_error_of("train.lr=nan"), "train.lr: 'nan' is not a number");
  EXPECT_EQ(setting_error_of("train.lr_scale=0"), "train.lr_scale: must be greater than 0, got 0");
  EXPECT_EQ(setting_error_of("train.log_interval=0"),
            "train.log_interval: must be a whole number of steps of at least 1, got 0");
  EXPECT_EQ(setting_error_of("train.eval_interval=2.5"),
            "train.eval_interval: must be a whole number of steps, got 2.5");
}

TEST(Setting, RangesComeFromTheRunsConfigAndForceGoesPastThem) {
  const std::string config = R"({"train":{"lr":0.0003,"steps":500}})";
  const SettingLimits limits = setting_limits(config);
  EXPECT_EQ(limits.peak_lr, 0.0003);
  EXPECT_EQ(limits.steps, 500);
  EXPECT_FALSE(setting_limits("not json").peak_lr.has_value());
  EXPECT_EQ(checked_setting("train.lr=0.003", config, false, "force it"), "train.lr=0.003");
  EXPECT_EQ(test::error_of([&] { checked_setting("train.lr=0.0031", config, false, "force it"); }),
            "train.lr=0.0031 is outside its range: above 0 and at most 0.003 (10x the run's configured peak "
            "0.0003); force it");
  EXPECT_EQ(checked_setting("train.lr=0.3", config, true, "force it"), "train.lr=0.3");
  EXPECT_EQ(test::error_of([&] { checked_setting("train.lr=0.31", config, true, "force it"); }),
            "train.lr=0.31 is outside what a run can hold: at most 1000x the run's configured peak 0.0003, even with "
            "--force");
  EXPECT_EQ(test::error_of([&] { checked_setting("train.lr=-1", config, true, "force it"); }),
            "train.lr: must be greater than 0, got -1")
      << "force widens the range, never past what a run can apply";
  EXPECT_EQ(test::error_of([&] { checked_setting("train.eval_interval=501", config, false, "force it"); }),
            "train.eval_interval=501 is outside its range: at most the run's train.steps, 500; force it");
  EXPECT_EQ(checked_setting("train.eval_interval=0", config, false, "force it"), "train.eval_interval=0");
  EXPECT_EQ(checked_setting("train.lr=5", "{}", false, "force it"), "train.lr=5") << "no config, no peak to bound by";
}

TEST(Setting, TheLearningRateScaleHasOneRangeForcedOrNot) {
  EXPECT_EQ(lr_scale_problem(kMaxLrScale), "");
  EXPECT_EQ(lr_scale_problem(1e-310), "") << "tiny, but a run can hold it";
  for (const double bad : {0.0, -1.0, 1000.5, 1e308, std::numeric_limits<double>::infinity()})
    EXPECT_EQ(lr_scale_problem(bad), "above 0 and at most 1000") << bad;
  const std::string config = R"({"train":{"lr":0.001,"steps":500}})";
  EXPECT_EQ(checked_setting("train.lr_scale=1000", config, true, "force it"), "train.lr_scale=1000");
  EXPECT_EQ(test::error_of([&] { checked_setting("train.lr_scale=1e308", config, true, "force it"); }),
            "train.lr_scale=1e308 is outside what a run can hold: above 0 and at most 1000, even with --force");
  // A denormal rate is refused as a typo unless forced; the message shows it as typed.
  EXPECT_EQ(test::error_of([&] { checked_setting("train.lr=1e-310", config, false, "force it"); }),
            "train.lr=1e-310 is outside its range: a normal number, at least 2.22507e-308 (this one is denormal); "
            "force it");
  EXPECT_EQ(checked_setting("train.lr=1e-310", config, true, "force it"), "train.lr=1e-310");
  EXPECT_EQ(test::error_of([&] { checked_setting("train.lr_scale=1e-310", config, false, "force it"); }),
            "train.lr_scale=1e-310 is outside its range: a normal number, at least 2.22507e-308 (this one is "
            "denormal); force it");
}

}  // namespace
}  // namespace kiln
