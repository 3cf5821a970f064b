// GPU readings through NVML, loaded at run time: libnvidia-ml.so.1 ships with the NVIDIA
// driver (not with the toolkit, which has no nvml.h here), so a build never links it and a
// machine without a driver simply has no readings.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace kiln {

struct GpuReading {
  double util_percent = 0;
  int64_t mem_used_bytes = 0;
  double power_w = 0;
  double temp_c = 0;
};

class Nvml {
 public:
  // The GPU with this PCI bus id (as CUDA names it), or null when NVML or the GPU is not
  // there. Never throws: telemetry is optional.
  static std::unique_ptr<Nvml> open(const std::string& pci_bus_id);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // A reading whose unsupported parts (no power sensor, say) are NaN or 0 is still a
  // reading; nullopt only when the device stopped answering.
  std::optional<GpuReading> read() const;

 private:
  struct Library;
  explicit Nvml(std::unique_ptr<Library> library);
  std::unique_ptr<Library> library_;
};

}  // namespace kiln
