// Before a run opens its data: is there any? A fresh clone has no data/ folder, and the first
// thing a new user meets should say how to get some, not which file is missing.
#pragma once

#include "trainer/config/config.h"

namespace kiln {

// Refuses, in one line naming the config key and how to make what is missing, a config whose
// data.paths prefixes (the blend weights aside) have no PREFIX.idx, or whose data.tokenizer is
// neither `byte` nor a file or folder. With none of them present, it points at the demo
// corpus (scripts/prepare-kjv.sh, make demo) as well as at `kiln data prepare`.
void check_data_present(const DataConfig& data);

}  // namespace kiln
