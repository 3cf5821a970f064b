// Megatron's blended dataset: several GPT datasets mixed by weights. Sample i of the blend
// is sample dataset_sample[i] of dataset dataset[i], the two arrays built greedily (each
// sample goes to the dataset furthest behind its share, trainer/data/gpt_indices.h) and
// cached like the GPT dataset's own indices.
#pragma once

#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "trainer/data/gpt_dataset.h"
#include "trainer/data/index_cache.h"
#include "trainer/data/npy_file.h"

namespace kiln {

// One entry of data.paths: a dataset prefix and its weight in the blend.
struct WeightedPrefix {
  double weight = 1.0;
  std::string prefix;
};

// data.paths as Megatron reads --data-path: either prefixes alone ("data/a", "data/b"),
// weighted by their split's tokens, or weight, prefix pairs ("0.7", "data/a", "0.3",
// "data/b"). Weights are positive numbers, normalised here to sum to 1. kiln::Error on a
// list that mixes the two forms, a missing prefix or a weight that is not positive.
std::vector<WeightedPrefix> parse_data_paths(const std::vector<std::string>& paths);

// The samples of one split of data.paths: a GptDataset for a single prefix, a
// BlendedDataset for several. spec.prefix is ignored; spec.num_samples is the blend's.
std::unique_ptr<SampleSource> open_samples(const std::vector<std::string>& paths,
                                           const GptDatasetSpec& spec, std::FILE* log = nullptr);

class BlendedDataset final : public SampleSource {
 public:
  // parts[d] must hold enough samples for weights[d] of size (open_samples sees to it).
  BlendedDataset(std::vector<std::unique_ptr<GptDataset>> parts, std::vector<double> weights,
                 int64_t size, const std::string& cache_dir, Split split, std::FILE* log);

  int64_t num_samples() const override { return static_cast<int64_t>(dataset_.size()); }
  void sample(int64_t index, int32_t* out) const override;
  // Masked where any part is; a part without a mask trains every token.
  bool has_loss_mask() const override;
  void loss_mask(int64_t index, int32_t* out) const override;
  int64_t num_tokens() const override;
  int32_t max_token_id() const override;
  std::string describe() const override;

 private:
  // Opens the cached blend arrays and checks them against the parts; a damaged or
  // truncated cache is a kiln::Error.
  void open_indices(const IndexCache& cache, int64_t size);

  std::vector<std::unique_ptr<GptDataset>> parts_;
  std::vector<double> weights_;
  NpyArray dataset_file_, dataset_sample_file_;
  std::span<const int16_t> dataset_;
  std::span<const int64_t> dataset_sample_;
};

}  // namespace kiln
