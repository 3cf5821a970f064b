// The index arrays of Megatron's GPT dataset and of its blended dataset, built as
// megatron/core/datasets/gpt_dataset.py and helpers.cpp build them, so that for one seed,
// one split and one requested sample count kiln trains on the same samples in the same
// order as Megatron does:
//
//   document index  the split's documents repeated over as many epochs as the requested
//                   samples need, shuffled (the last epoch on its own when it is used for
//                   less than 80% of its samples, so a short tail does not skew the mix)
//   sample index    (num_samples + 1) x 2: where sample k starts, as (position in the
//                   document index, token offset in that document); sample k runs from row
//                   k to row k + 1 inclusive, seq_len + 1 tokens crossing documents
//   shuffle index   the order in which samples are visited (again the final epoch's
//                   samples apart when the document index keeps it apart)
//   blending        for each sample of a blend, which dataset it comes from and which of
//                   that dataset's samples: greedily the dataset furthest behind its weight
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "trainer/data/numpy_random.h"

namespace kiln {

// How many epochs a split needs to give num_samples samples of seq_len + 1 tokens, and
// whether its final epoch is shuffled apart. Megatron's _get_num_epochs and its 80% rule.
struct EpochPlan {
  int64_t tokens_per_epoch = 0;
  int64_t num_epochs = 0;
  bool separate_final_epoch = false;
  int64_t samples_before_final_epoch = 0;  // when separate_final_epoch
};
EpochPlan plan_epochs(int64_t tokens_per_epoch, int64_t num_samples, int seq_len);

// documents: the split's document numbers (their order before shuffling). Draws from rng.
std::vector<int32_t> build_document_index(std::span<const int32_t> documents,
                                          const EpochPlan& plan, NumpyRandomState& rng);

// document_sizes[d]: tokens of document d (indexed by document number). Every sample that
// fits in the document index: (plan.num_epochs * tokens_per_epoch - 1) / seq_len of them,
// at least the requested count.
std::vector<int64_t> build_sample_index(std::span<const int64_t> document_sizes,
                                        std::span<const int32_t> document_index,
                                        const EpochPlan& plan, int seq_len);

// A shuffled order of the num_samples samples; with a separate final epoch the first
// plan.samples_before_final_epoch are shuffled among themselves and the rest after them.
std::vector<int64_t> build_shuffle_index(int64_t num_samples, const EpochPlan& plan,
                                         NumpyRandomState& rng);

// weights: normalised, one per dataset (at most 32767). Fills dataset[i] and
// dataset_sample[i] for the size samples of a blend.
void build_blending_indices(std::span<const double> weights, int64_t size,
                            std::vector<int16_t>& dataset, std::vector<int64_t>& dataset_sample);

}  // namespace kiln
