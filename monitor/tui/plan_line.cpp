#include "monitor/tui/plan_line.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "monitor/format/figures.h"
#include "monitor/tui/draw.h"
#include "store/run_figures.h"

namespace kiln::tui {
namespace {

constexpr const char* kSeparator = " · ";
constexpr const char* kSlowerNote = " (slower than planned)";

std::string ms_per_step(double seconds) {
  return std::isfinite(seconds) && seconds > 0 ? fmt::format("{:.1f} ms/step", seconds * 1e3)
                                               : std::string(kAbsent) + " ms/step";
}

const store::MetricRow* rank_zero(const std::vector<store::MetricRow>& latest) {
  const auto zero = std::find_if(latest.begin(), latest.end(), [](const store::MetricRow& r) { return r.rank == 0; });
  return zero != latest.end() ? &*zero : nullptr;
}

}  // namespace

std::string PlanLine::text() const {
  return planned_step + kSeparator + measured_step + (slower ? kSlowerNote : "") + kSeparator + memory;
}

std::optional<PlanLine> plan_line(const store::RunRecord& run, const std::vector<store::MetricRow>& latest,
                                  const std::vector<double>& rates) {
  const bool has_step = std::isfinite(run.planned_step_s) && run.planned_step_s > 0;
  if (!has_step && !run.planned_memory_bytes) return std::nullopt;
  const double measured = store::measured_step_s(latest);
  PlanLine line;
  line.planned_step = "planned " + ms_per_step(run.planned_step_s);
  line.measured_step = "measured " + ms_per_step(measured);
  const store::MetricRow* zero = rank_zero(latest);
  line.slower = store::slower_than_planned(run.planned_step_s, store::persisting_step_s(latest, rates));
  line.memory = "planned memory " + bytes_or_absent(run.planned_memory_bytes) + " · measured " +
                bytes_or_absent(zero != nullptr ? zero->mem_used : std::nullopt);
  return line;
}

void draw_plan_line(int row, int width, const store::RunRecord& run, const std::vector<store::MetricRow>& latest,
                    const std::vector<double>& rates, const Theme& theme) {
  const std::optional<PlanLine> line = plan_line(run, latest, rates);
  if (!line) return;
  int col = 1;
  const auto part = [&](const std::string& text, int attr) {
    col += put(row, col, text, std::max(0, width - col), attr);
  };
  part(line->planned_step + kSeparator, theme.attr(Tone::Dim));
  part(line->measured_step + (line->slower ? kSlowerNote : ""),
       theme.attr(line->slower ? Tone::Bad : Tone::Plain));
  part(kSeparator + line->memory, theme.attr(Tone::Dim));
}

}  // namespace kiln::tui
