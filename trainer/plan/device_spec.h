// The devices a plan is made for: memory, the rates kiln sustains on them (its products, its
// attention, its memory-bound ops) and the links between them, within a node and between
// nodes. The GPU rates are kiln's measured ones where bench/results holds them, the links the
// published NVLink and InfiniBand figures at the bandwidth NCCL's rings reach; a profile from
// `kiln_bench_step --profile --profile-json` replaces a device's three rates by the ones it
// measured (docs/planner.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kiln {

struct LinkSpec {
  double bytes_per_s = 0;  // each rank's share, one direction, as a ring's steps see it
  double latency_s = 0;    // per ring step
};

struct DeviceSpec {
  std::string name;         // what --gpu takes: h100, h200, a100, a100-40gb, cpu
  std::string description;  // "NVIDIA H100 SXM 80GB"
  bool gpu = true;
  double memory_bytes = 0;  // what a rank may allocate
  double peak_flops = 0;    // dense BF16 peak, MFU's denominator (0: none)
  double gemm_flops = 0;    // sustained by large products
  double attention_flops = 0;
  double bytes_per_s = 0;   // sustained by the memory-bound ops
  double op_overhead_s = 0; // each op's fixed cost: a kernel launch, an OpenMP fork and join
  int devices_per_node = 8;
  LinkSpec intra_node, inter_node;
  // The CPU: its cores, and the threads the rates above were measured with (the ranks of a
  // machine share its cores: each runs on its own share of them).
  int cores = 0;
  int rate_threads = 0;
};

const std::vector<DeviceSpec>& known_devices();
// --gpu's name (case-insensitive); refused in one line naming the known ones.
DeviceSpec device_spec(const std::string& name);
// The device a run's own backend is, for its plan beside its measurements: the CPU backend is
// "cpu"; a GPU is read from the backend's name (Ops::name(), which carries the GPU's): H200,
// H100, A100 with 40GB, A100. A GPU the table does not know gives nothing.
std::optional<DeviceSpec> device_for_backend(const std::string& ops_name, bool gpu);
// The device with its products', attention's and memory-bound ops' rates from a profile of
// kiln_bench_step (--profile-json): each op class's FLOPs or bytes over its measured time.
DeviceSpec with_profile(DeviceSpec device, const std::string& profile_json_path);

}  // namespace kiln
