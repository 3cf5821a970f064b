#include "bench/step_profile.h"

#include <algorithm>

#include <fmt/core.h>

namespace kiln {
namespace {

// An op's figures per step, from its totals over the profiled steps.
struct PerStep {
  double calls, ms, flops, bytes;
  PerStep(const OpProfile& op, int steps)
      : calls(static_cast<double>(op.calls) / steps),
        ms(op.seconds * 1e3 / steps),
        flops(op.flops / steps),
        bytes(op.bytes / steps) {}
};

double ops_ms(const StepProfile& profile) {
  double ms = 0;
  for (const OpProfile& op : profile.ops) ms += PerStep(op, profile.steps).ms;
  return ms;
}

}  // namespace

double DeviceCeilings::floor_seconds(double flops, double bytes) const {
  return std::max(flops / gemm_flops, bytes / bandwidth);
}

std::string profile_table(const StepProfile& profile, const DeviceCeilings& ceilings) {
  const double step_ms = profile.wall_seconds * 1e3 / profile.steps;
  std::string out = fmt::format(
      "{}: {} profiled steps, each op timed between device synchronizations\n\n"
      "| op | shape | calls/step | ms/step | % of step | TFLOP/s | GB/s | floor ms | x floor |\n"
      "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
      profile.title, profile.steps);
  double floor_ms = 0, calls = 0;
  for (const OpProfile& op : profile.ops) {
    const PerStep s(op, profile.steps);
    const std::string tflops = s.flops > 0 ? fmt::format("{:.2f}", s.flops / s.ms / 1e9) : "";
    std::string floor, over;
    if (ceilings.known()) {
      const double ms = ceilings.floor_seconds(s.flops, s.bytes) * 1e3;
      floor = fmt::format("{:.3f}", ms);
      over = fmt::format("{:.1f}", s.ms / ms);
      floor_ms += ms;
    }
    calls += s.calls;
    out += fmt::format("| {} | {} | {:g} | {:.3f} | {:.1f} | {} | {:.1f} | {} | {} |\n", op.op,
                       op.shape, s.calls, s.ms, 100 * s.ms / step_ms, tflops,
                       s.bytes / s.ms / 1e6, floor, over);
  }
  const double in_ops = ops_ms(profile);
  out += fmt::format("| **all ops** | | {:g} | {:.3f} | {:.1f} | | | {} | {} |\n", calls, in_ops,
                     100 * in_ops / step_ms,
                     ceilings.known() ? fmt::format("{:.3f}", floor_ms) : "",
                     ceilings.known() ? fmt::format("{:.1f}", in_ops / floor_ms) : "");
  out += fmt::format("\nProfiled step: {:.3f} ms, of which {:.3f} ms inside the ops.\n", step_ms,
                     in_ops);
  return out;
}

nlohmann::json profile_json(const StepProfile& profile, const DeviceCeilings& ceilings) {
  nlohmann::json ops = nlohmann::json::array();
  for (const OpProfile& op : profile.ops) {
    const PerStep s(op, profile.steps);
    nlohmann::json record = {{"op", op.op},           {"shape", op.shape},
                             {"calls_per_step", s.calls}, {"ms_per_step", s.ms},
                             {"flops_per_step", s.flops}, {"bytes_per_step", s.bytes},
                             {"floor_ms", nullptr}};
    if (ceilings.known()) record["floor_ms"] = ceilings.floor_seconds(s.flops, s.bytes) * 1e3;
    ops.push_back(record);
  }
  nlohmann::json out = {{"title", profile.title},
                        {"threads", profile.threads},
                        {"steps", profile.steps},
                        {"step_ms", profile.wall_seconds * 1e3 / profile.steps},
                        {"ops_ms", ops_ms(profile)},
                        {"gemm_tflops", nullptr},
                        {"bandwidth_gbs", nullptr},
                        {"ops", ops}};
  if (ceilings.known()) {
    out["gemm_tflops"] = ceilings.gemm_flops / 1e12;
    out["bandwidth_gbs"] = ceilings.bandwidth / 1e9;
  }
  return out;
}

}  // namespace kiln
