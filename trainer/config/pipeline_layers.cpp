#include "trainer/config/pipeline_layers.h"

#include <fmt/core.h>

#include "base/check.h"

namespace kiln {

void check_pipeline_sizes(int pp, int vpp, int micro_batches) {
  KILN_CHECK(pp >= 1 && vpp >= 1 && micro_batches >= 1,
             fmt::format("pipeline: pp={}, vpp={} and {} micro-batches must all be >= 1", pp, vpp,
                         micro_batches));
}

std::vector<int> pipeline_layers(int n_layer, int pp, int vpp, int first, int last) {
  check_pipeline_sizes(pp, vpp, 1);
  const int stages = pp * vpp;
  KILN_CHECK(first >= 0 && last >= 0, "pipeline: first and last stage layers must be >= 0");
  KILN_CHECK(stages > 1 || (first == 0 && last == 0),
             "pipeline: first and last stage layers need more than one stage");
  int rest = n_layer, middle = stages;
  if (first > 0) rest -= first, --middle;
  if (last > 0) rest -= last, --middle;
  const bool fits = middle == 0 ? rest == 0 : rest >= middle && rest % middle == 0;
  if (!fits)
    fail(fmt::format("pipeline: model.n_layer={}{}{} leaves {} layers, which do not split evenly "
                     "over the other {} of pp x vpp = {} x {} = {} stages (each needs one or more)",
                     n_layer, first > 0 ? fmt::format(" - {} on the first stage", first) : "",
                     last > 0 ? fmt::format(" - {} on the last", last) : "", rest, middle, pp,
                     vpp, stages));
  std::vector<int> layers(static_cast<size_t>(stages), middle > 0 ? rest / middle : 0);
  if (first > 0) layers.front() = first;
  if (last > 0) layers.back() = last;
  return layers;
}

}  // namespace kiln
