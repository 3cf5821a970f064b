// The run page's system panels: rank 0's machine over the time since the run started. A run
// on the CPU has no GPU panel (and no MFU chart: no peak FLOP/s to measure against); a panel
// that stays empty says why.
export function systemPanels(backend) {
  const panels = [
    { name: "system", title: "CPU, rank 0 (% of one core)", keys: [["cpu_percent", "process CPU %"]] },
    { name: "host-memory", title: "Host memory, rank 0 (bytes)",
      keys: [["host_mem_used", "machine in use"], ["host_mem_total", "machine total"], ["rss_bytes", "this process (resident)"]] },
  ];
  if (backend !== "cpu")
    panels.push({ name: "gpu", title: "GPU, rank 0", empty: "no readings: NVML did not answer",
      keys: [["gpu_util", "util %"], ["gpu_temp_c", "°C"], ["gpu_power_w", "power W"]] });
  return panels;
}

// What a run on the CPU leaves out, for the line above its charts.
export const cpuNote = "Trained on the CPU: no MFU chart (no peak FLOP/s to measure against) and no GPU panel.";
