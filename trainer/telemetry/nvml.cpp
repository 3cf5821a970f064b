#include "trainer/telemetry/nvml.h"

#include <dlfcn.h>

#include <cmath>
#include <limits>

namespace kiln {
// The few NVML declarations we call, as NVML's API reference defines them. Named, not
// anonymous: Nvml::Library's members have these types, and a class with members of an
// anonymous namespace's types must live in the main file of its translation unit.
namespace nvml_api {

using NvmlReturn = int;  // nvmlReturn_t; NVML_SUCCESS is 0
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr int kNvmlTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU
struct NvmlDeviceOpaque;
using NvmlDevice = NvmlDeviceOpaque*;
struct NvmlUtilization {
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

template <typename Fn>
Fn nvml_symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

}  // namespace nvml_api

using namespace nvml_api;

struct Nvml::Library {
  void* handle = nullptr;
  NvmlDevice device = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*power)(NvmlDevice, unsigned int*) = nullptr;
  NvmlReturn (*temperature)(NvmlDevice, int, unsigned int*) = nullptr;

  ~Library() {
    if (shutdown) shutdown();
    if (handle) dlclose(handle);
  }
};

Nvml::Nvml(std::unique_ptr<Library> library) : library_(std::move(library)) {}
Nvml::~Nvml() = default;

std::unique_ptr<Nvml> Nvml::open(const std::string& pci_bus_id) {
  auto lib = std::make_unique<Library>();
  lib->handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib->handle) return nullptr;
  const auto init = nvml_symbol<NvmlReturn (*)()>(lib->handle, "nvmlInit_v2");
  const auto by_bus_id =
      nvml_symbol<NvmlReturn (*)(const char*, NvmlDevice*)>(lib->handle, "nvmlDeviceGetHandleByPciBusId_v2");
  lib->utilization = nvml_symbol<decltype(lib->utilization)>(lib->handle, "nvmlDeviceGetUtilizationRates");
  lib->memory = nvml_symbol<decltype(lib->memory)>(lib->handle, "nvmlDeviceGetMemoryInfo");
  lib->power = nvml_symbol<decltype(lib->power)>(lib->handle, "nvmlDeviceGetPowerUsage");
  lib->temperature = nvml_symbol<decltype(lib->temperature)>(lib->handle, "nvmlDeviceGetTemperature");
  const auto shutdown = nvml_symbol<NvmlReturn (*)()>(lib->handle, "nvmlShutdown");
  if (!init || !by_bus_id || !lib->utilization || !lib->memory || !lib->power ||
      !lib->temperature || !shutdown)
    return nullptr;
  if (init() != kNvmlSuccess) return nullptr;
  lib->shutdown = shutdown;
  if (by_bus_id(pci_bus_id.c_str(), &lib->device) != kNvmlSuccess) return nullptr;
  return std::unique_ptr<Nvml>(new Nvml(std::move(lib)));
}

std::optional<GpuReading> Nvml::read() const {
  const Library& lib = *library_;
  NvmlMemory memory{};
  if (lib.memory(lib.device, &memory) != kNvmlSuccess) return std::nullopt;
  constexpr double kAbsent = std::numeric_limits<double>::quiet_NaN();
  GpuReading r;
  r.mem_used_bytes = static_cast<int64_t>(memory.used);
  NvmlUtilization util{};
  r.util_percent = lib.utilization(lib.device, &util) == kNvmlSuccess ? util.gpu : kAbsent;
  unsigned int milliwatts = 0;
  r.power_w = lib.power(lib.device, &milliwatts) == kNvmlSuccess ? milliwatts / 1000.0 : kAbsent;
  unsigned int celsius = 0;
  r.temp_c = lib.temperature(lib.device, kNvmlTemperatureGpu, &celsius) == kNvmlSuccess
                 ? static_cast<double>(celsius)
                 : kAbsent;
  return r;
}

}  // namespace kiln
