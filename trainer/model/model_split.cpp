#include "trainer/model/model_split.h"

#include "base/check.h"

namespace kiln {

Recompute parse_recompute(const std::string& name) {
  if (name == "none") return Recompute::None;
  if (name == "selective") return Recompute::Selective;
  if (name == "full") return Recompute::Full;
  fail("train.recompute must be none, selective or full, not '" + name + "'");
}

}  // namespace kiln
