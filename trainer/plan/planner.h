// The layout planner: every layout of a config on N devices (tensor, context, pipeline with
// virtual stages, data and expert sizes, micro-batch, recomputation, distributed optimizer),
// each refused with the reason when it does not divide, else predicted (time_model.h) and
// ranked fastest first; the fastest are sized rank by rank with the trainer's own code
// (rank_memory.h) until `top` of them fit the device.
#pragma once

#include <string>
#include <vector>

#include "trainer/config/config.h"
#include "trainer/plan/device_spec.h"
#include "trainer/plan/rank_memory.h"
#include "trainer/plan/time_model.h"

namespace kiln {

struct PlanRequest {
  Config config;  // the model, the global batch, precision; its parallel section is replaced
  int devices = 1;
  DeviceSpec device;
  int nodes = 0;  // 0: devices / the device's devices_per_node, rounded up
  int top = 10;   // fitting layouts to size and show; 0: size every candidate
  bool search = true;  // false: the config's own layout alone (its parallel section as given)
};

struct PlannedLayout {
  Config config;  // the config that runs it: its parallel section, micro-batch and recompute
  std::string name;  // "tp2.pp4.dp8 mb2 selective dist-opt"
  StepPrediction time;
  bool sized = false;
  RankMemory memory;  // of the rank that needs the most (the first or the last stage)
  int memory_rank = 0;
  std::string refused;  // why it cannot run: "does not divide: ...", "does not fit: ..."
};

struct Plan {
  std::vector<PlannedLayout> fitting;  // sized and fitting, fastest first
  std::vector<PlannedLayout> too_big;  // sized, faster than the last fitting one, over memory
  int candidates = 0;                  // layouts enumerated
  int not_dividing = 0;                // refused by the arithmetic of the split
  std::vector<std::string> divide_reasons;  // a few of those reasons, distinct
  int not_sized = 0;                   // predicted slower than the fitting ones shown
  int ranks_per_node = 0;
  int nodes = 0;
};

Plan make_plan(const PlanRequest& request);

// The one fastest fitting layout's config for `devices` ranks (kiln train --layout auto):
// refused in one line when none fits.
PlannedLayout best_layout(const Config& config, int devices, const DeviceSpec& device);

}  // namespace kiln
