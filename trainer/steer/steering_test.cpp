#include "trainer/steer/steering.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

using store::Command;
using store::CommandAction;

Command command(int64_t id, CommandAction action, std::string argument = {}) {
  Command c;
  c.id = id;
  c.action = action;
  c.argument = std::move(argument);
  return c;
}

TEST(Steering, NothingPendingIsAnEmptyDecision) {
  const SteeringDecision d = decide({}, false);
  EXPECT_TRUE(d.empty());
  EXPECT_FALSE(d.pause || d.resume || d.stop);
}

TEST(Steering, PauseAndResumeToggleInOrder) {
  SteeringDecision d = decide({command(1, CommandAction::Pause)}, false);
  EXPECT_TRUE(d.pause);
  ASSERT_EQ(d.outcomes.size(), 1u);
  EXPECT_TRUE(d.outcomes[0].applied);
  EXPECT_EQ(d.outcomes[0].command_id, 1);

  d = decide({command(2, CommandAction::Pause)}, true);
  EXPECT_FALSE(d.pause);
  EXPECT_FALSE(d.outcomes[0].applied);
  EXPECT_EQ(d.outcomes[0].reason, "already paused");

  d = decide({command(3, CommandAction::Resume)}, false);
  EXPECT_FALSE(d.resume);
  EXPECT_EQ(d.outcomes[0].reason, "not paused");

  // Pause then resume in one batch: both applied, the run keeps running.
  d = decide({command(4, CommandAction::Pause), command(5, CommandAction::Resume)}, false);
  EXPECT_FALSE(d.pause);
  EXPECT_FALSE(d.resume);
  EXPECT_TRUE(d.outcomes[0].applied);
  EXPECT_TRUE(d.outcomes[1].applied);

  d = decide({command(6, CommandAction::Resume)}, true);
  EXPECT_TRUE(d.resume);
}

TEST(Steering, CommandsAfterAStopAreRejected) {
  const SteeringDecision d =
      decide({command(1, CommandAction::Stop), command(2, CommandAction::Set, "train.lr=1e-4")},
             false);
  EXPECT_TRUE(d.stop);
  EXPECT_TRUE(d.outcomes[0].applied);
  EXPECT_FALSE(d.outcomes[1].applied);
  EXPECT_EQ(d.outcomes[1].reason, "the run is stopping");
  EXPECT_TRUE(d.settings.empty());
}

TEST(Steering, AReleaseStopsTheRunAndRejectsWhatFollows) {
  const SteeringDecision d =
      decide({command(1, CommandAction::Release), command(2, CommandAction::Checkpoint)}, true);
  EXPECT_TRUE(d.stop);
  EXPECT_TRUE(d.release);
  EXPECT_FALSE(d.checkpoint) << "the release writes its own checkpoint";
  ASSERT_EQ(d.outcomes.size(), 2u);
  EXPECT_TRUE(d.outcomes[0].applied);
  EXPECT_EQ(d.outcomes[0].reason, "releasing");
  EXPECT_FALSE(d.outcomes[1].applied);
  EXPECT_EQ(d.outcomes[1].reason, "the run is being released");
  EXPECT_FALSE(decide({command(3, CommandAction::Stop)}, false).release);
}

TEST(Steering, SettingsAreParsedAndBadOnesRejectedWithTheReason) {
  const SteeringDecision d = decide({command(1, CommandAction::Set, "train.lr_scale=0.5"),
                                     command(2, CommandAction::Set, "model.n_layer=3"),
                                     command(3, CommandAction::Set, "train.log_interval=7")},
                                    false);
  ASSERT_EQ(d.settings.size(), 2u);
  EXPECT_EQ(d.settings[0].key, "train.lr_scale");
  EXPECT_DOUBLE_EQ(d.settings[0].value, 0.5);
  EXPECT_EQ(d.settings[1].key, "train.log_interval");
  EXPECT_EQ(d.setting_outcome, (std::vector<size_t>{0, 2}));
  EXPECT_FALSE(d.outcomes[1].applied);
  EXPECT_NE(d.outcomes[1].reason.find("model.n_layer cannot change during a run"),
            std::string::npos);
}

TEST(Steering, CheckpointCommandsAreApplied) {
  const SteeringDecision d =
      decide({command(1, CommandAction::Checkpoint), command(2, CommandAction::Checkpoint)}, false);
  EXPECT_TRUE(d.checkpoint);
  EXPECT_FALSE(d.stop);
  EXPECT_TRUE(d.outcomes[0].applied && d.outcomes[1].applied);
}

}  // namespace
}  // namespace kiln
