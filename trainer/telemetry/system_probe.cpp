#include "trainer/telemetry/system_probe.h"

#include <algorithm>
#include <fstream>

#include "trainer/telemetry/host_memory.h"

namespace kiln {

SystemProbe::SystemProbe(Ops& ops, [[maybe_unused]] int gpu) : ops_(ops), gpu_(ops.device() == Device::Cuda) {
  if (!gpu_) return;
  free_at_start_ = static_cast<int64_t>(ops_.available_memory());
#ifdef KILN_HAVE_CUDA
  nvml_ = Nvml::open(cuda_pci_bus_id(gpu));
#endif
}

std::string SystemProbe::device_name() const {
  // The op backend names its device in brackets: "cuda:0 (NVIDIA H100 80GB HBM3)",
  // "cpu (2 threads, OpenBLAS SkylakeX)".
  const std::string ops = ops_.name();
  const size_t open = ops.find('('), close = ops.rfind(')');
  const std::string inner =
      open != std::string::npos && close > open ? ops.substr(open + 1, close - open - 1) : ops;
  if (gpu_) return inner;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    const size_t colon = line.find(':');
    if (line.rfind("model name", 0) == 0 && colon != std::string::npos && colon + 2 <= line.size())
      return line.substr(colon + 2) + " (" + inner + ")";
  }
  return inner;
}

MemoryReading SystemProbe::memory() {
  MemoryReading m;
  if (gpu_) {
    m.used = std::max<int64_t>(0, free_at_start_ - static_cast<int64_t>(ops_.available_memory()));
    peak_ = std::max(peak_, m.used);
    m.peak = peak_;
  } else {
    m.used = ProcessStats::rss_bytes();
    // The kernel's high-water mark is counted apart from statm and can trail it by a page.
    m.peak = std::max(ProcessStats::peak_rss_bytes(), m.used);
  }
  return m;
}

store::SystemRow SystemProbe::sample(int rank) {
  store::SystemRow row;
  row.rank = rank;
  row.cpu_percent = process_.cpu_percent();
  row.rss_bytes = ProcessStats::rss_bytes();
  if (const auto host = host_memory()) {
    row.host_mem_used = host->used;
    row.host_mem_total = host->total;
  }
  if (nvml_) {
    if (const auto gpu = nvml_->read()) {
      row.gpu_util = gpu->util_percent;
      row.gpu_mem_used = gpu->mem_used_bytes;
      row.gpu_power_w = gpu->power_w;
      row.gpu_temp_c = gpu->temp_c;
    }
  }
  return row;
}

}  // namespace kiln
