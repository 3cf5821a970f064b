#include "trainer/steer/steering.h"

#include "base/check.h"

namespace kiln {

SteeringDecision decide(const std::vector<store::Command>& pending, bool paused) {
  SteeringDecision d;
  bool paused_after = paused;
  for (const store::Command& c : pending) {
    CommandOutcome out{c.id, false, {}};
    if (d.stop) {
      out.reason = d.release ? "the run is being released" : "the run is stopping";
      d.outcomes.push_back(out);
      continue;
    }
    switch (c.action) {
      case store::CommandAction::Pause:
        out.applied = !paused_after;
        out.reason = out.applied ? "paused" : "already paused";
        paused_after = true;
        break;
      case store::CommandAction::Resume:
        out.applied = paused_after;
        out.reason = out.applied ? "resumed" : "not paused";
        paused_after = false;
        break;
      case store::CommandAction::Stop:
        out.applied = true;
        out.reason = "stopping";
        d.stop = true;
        break;
      case store::CommandAction::Release:
        out.applied = true;
        out.reason = "releasing";
        d.stop = true;
        d.release = true;
        break;
      case store::CommandAction::Checkpoint:
        out.applied = true;
        out.reason = "checkpoint";
        d.checkpoint = true;
        break;
      case store::CommandAction::Set:
        try {
          d.settings.push_back(parse_setting(c.argument));
          d.setting_outcome.push_back(d.outcomes.size());
          out.applied = true;
          out.reason = c.argument;
        } catch (const Error& e) {
          out.reason = e.what();
        }
        break;
    }
    d.outcomes.push_back(out);
  }
  d.pause = !paused && paused_after;
  d.resume = paused && !paused_after;
  return d;
}

}  // namespace kiln
