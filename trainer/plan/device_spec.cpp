#include "trainer/plan/device_spec.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <thread>

#include "base/check.h"

namespace kiln {
namespace {

constexpr double GiB = 1024.0 * 1024.0 * 1024.0;

std::vector<DeviceSpec> make_devices() {
  // H100 and H200: kiln's cuBLASLt products at 605-740 TFLOP/s and its memory-bound ops at
  // 2.1-2.4 TB/s (bench/results, H100 profiles of 2026-11-23; the H200's HBM is 1.4x
  // faster); attention by cuDNN's fused kernels, about 400 TFLOP/s forward and 300 backward
  // (H200, 2026-11-26). NVLink 4 carries 450 GB/s each way, of which NCCL's rings reach about
  // 360; each GPU has its own 400 Gb/s InfiniBand port, about 40 GB/s reached.
  const LinkSpec nvlink4{360e9, 10e-6}, ndr{40e9, 20e-6};
  // A100: 312 TFLOP/s peak, cuBLAS at about 250; NVLink 3 at 300 GB/s (240 reached); HDR
  // InfiniBand at 200 Gb/s (20 GB/s reached).
  const LinkSpec nvlink3{240e9, 10e-6}, hdr{20e9, 20e-6};
  // A CPU, one process per rank sharing the cores: one core's rates (a profile measures the
  // machine's own, docs/planner.md), MPI's transfers through shared memory.
  const LinkSpec shared_memory{2e9, 50e-6};
  return {
      {"h100", "NVIDIA H100 SXM 80GB", true, 78 * GiB, 989e12, 680e12, 300e12, 2.3e12, 4e-6, 8, nvlink4, ndr},
      {"h200", "NVIDIA H200 141GB", true, 138 * GiB, 989e12, 680e12, 300e12, 3.3e12, 4e-6, 8, nvlink4, ndr},
      {"a100", "NVIDIA A100 SXM 80GB", true, 78 * GiB, 312e12, 250e12, 150e12, 1.6e12, 4e-6, 8, nvlink3, hdr},
      {"a100-40gb", "NVIDIA A100 SXM 40GB", true, 39 * GiB, 312e12, 250e12, 150e12, 1.3e12, 4e-6, 8, nvlink3, hdr},
      {"cpu", "this machine's cores, shared by the ranks", false, 16 * GiB, 0, 90e9, 90e9, 15e9, 20e-6, 1024,
       shared_memory, shared_memory},
  };
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

const std::vector<DeviceSpec>& known_devices() {
  static const std::vector<DeviceSpec> devices = make_devices();
  return devices;
}

DeviceSpec device_spec(const std::string& name) {
  std::string names;
  for (DeviceSpec d : known_devices()) {
    if (d.name == lower(name)) {
      if (!d.gpu) {
        // The machine's cores, not this process's share: under mpirun a rank may be bound to one.
        d.cores = std::max(1u, std::thread::hardware_concurrency());
        d.rate_threads = 1;
      }
      return d;
    }
    names += (names.empty() ? "" : ", ") + d.name;
  }
  fail("plan: no device named '" + name + "'; known: " + names);
}

std::optional<DeviceSpec> device_for_backend(const std::string& ops_name, bool gpu) {
  if (!gpu) return device_spec("cpu");
  const std::string name = lower(ops_name);
  const auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (has("h200")) return device_spec("h200");
  if (has("h100")) return device_spec("h100");
  if (has("a100")) return device_spec(has("40gb") ? "a100-40gb" : "a100");
  return std::nullopt;
}

DeviceSpec with_profile(DeviceSpec device, const std::string& path) {
  std::ifstream in(path);
  KILN_CHECK(in.good(), "plan: cannot read the profile " + path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("plan: " + path + " is not a kiln_bench_step profile: " + e.what());
  }
  KILN_CHECK(j.contains("ops") && j["ops"].is_array(), "plan: " + path + " holds no \"ops\" (kiln_bench_step --profile-json)");
  double gemm_flops = 0, gemm_s = 0, attention_flops = 0, attention_s = 0, bytes = 0, bytes_s = 0;
  for (const nlohmann::json& op : j["ops"]) {
    const std::string name = op.value("op", "");
    const double s = op.value("ms_per_step", 0.0) / 1e3;
    // Every product is a product, fused with its bias, GELU or bias gradient or not, and the
    // experts' products too: a profile lists them under their own names (kernels/profiled_ops.h).
    if (name.rfind("matmul", 0) == 0 || name.rfind("expert_", 0) == 0) {
      gemm_flops += op.value("flops_per_step", 0.0);
      gemm_s += s;
    } else if (name.rfind("attention", 0) == 0) {
      attention_flops += op.value("flops_per_step", 0.0);
      attention_s += s;
    } else {
      bytes += op.value("bytes_per_step", 0.0);
      bytes_s += s;
    }
  }
  KILN_CHECK(gemm_s > 0 && attention_s > 0 && bytes_s > 0,
             "plan: " + path + " lacks products, attention or memory-bound ops to measure rates from");
  device.gemm_flops = gemm_flops / gemm_s;
  device.attention_flops = attention_flops / attention_s;
  device.bytes_per_s = bytes / bytes_s;
  if (!device.gpu) device.rate_threads = j.value("threads", device.rate_threads);
  device.description += " (rates from " + path + ")";
  return device;
}

}  // namespace kiln
