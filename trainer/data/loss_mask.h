// A dataset of conversations (`kiln data prepare --format chat`) has its loss mask beside it:
// an indexed dataset of its own, PREFIX.mask.bin + .idx, with the same documents and the same
// lengths, whose "token" is 1 where the dataset's token is trained and 0 where it is context
// (a prompt, a system text, the template's headers). docs/finetune.md.
#pragma once

#include <optional>
#include <string>

#include "trainer/data/indexed_dataset.h"

namespace kiln {

inline std::string loss_mask_prefix(const std::string& prefix) { return prefix + ".mask"; }

// The mask of `data`, or none when it has no PREFIX.mask.idx. A kiln::Error naming both when
// the mask's documents or lengths differ from the data's, or it holds anything but 0 and 1.
std::optional<IndexedDataset> open_loss_mask(const IndexedDataset& data);

}  // namespace kiln
