#include "trainer/data/blended_dataset.h"

#include <algorithm>
#include <cmath>
#include <fmt/core.h>
#include <cstdlib>

#include "base/check.h"
#include "trainer/data/gpt_indices.h"
#include "trainer/data/index_cache.h"

namespace kiln {
namespace {

// Megatron asks each dataset of a blend for half a percent more than its share, so the
// greedy blend, which can run a sample ahead of a share, never runs out.
constexpr double kSurplus = 1.005;

bool parse_weight(const std::string& text, double& weight) {
  char* end = nullptr;
  weight = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size();
}

// Tokens in the split of one prefix, to weight an unweighted list by size.
int64_t split_tokens(const std::string& prefix, const GptDatasetSpec& spec) {
  const IndexedDataset data(prefix);
  const std::vector<int64_t> bounds = split_boundaries(spec.split, data.num_documents());
  const auto s = static_cast<size_t>(spec.which);
  if (bounds[s + 1] == bounds[s]) return 0;
  return data.document_tokens(bounds[s + 1] - 1).second - data.document_tokens(bounds[s]).first;
}

}  // namespace

std::vector<WeightedPrefix> parse_data_paths(const std::vector<std::string>& paths) {
  KILN_CHECK(!paths.empty(), "data.paths is empty: name at least one dataset prefix");
  double weight = 0;
  std::vector<WeightedPrefix> out;
  if (!parse_weight(paths[0], weight)) {
    for (const std::string& prefix : paths) {
      KILN_CHECK(!parse_weight(prefix, weight),
                 "data.paths: \"" + prefix + "\" is a weight in a list of prefixes; give a "
                 "weight before every prefix (\"0.7\", \"data/a\", \"0.3\", \"data/b\") or none");
      out.push_back({1.0, prefix});
    }
    return out;
  }
  KILN_CHECK(paths.size() % 2 == 0,
             "data.paths: weights and prefixes must come in pairs (weight, prefix, ...), got " +
                 std::to_string(paths.size()) + " entries");
  double total = 0;
  for (size_t i = 0; i < paths.size(); i += 2) {
    KILN_CHECK(parse_weight(paths[i], weight) && std::isfinite(weight) && weight > 0,
               "data.paths: \"" + paths[i] + "\" (entry " + std::to_string(i) +
                   ") is not a positive weight");
    double number = 0;
    KILN_CHECK(!parse_weight(paths[i + 1], number),
               "data.paths: entry " + std::to_string(i + 1) + " should be a prefix, got the number " +
                   paths[i + 1]);
    out.push_back({weight, paths[i + 1]});
  }
  for (const WeightedPrefix& p : out) total += p.weight;
  for (WeightedPrefix& p : out) p.weight /= total;
  return out;
}

std::unique_ptr<SampleSource> open_samples(const std::vector<std::string>& paths,
                                           const GptDatasetSpec& spec, std::FILE* log) {
  std::vector<WeightedPrefix> blend = parse_data_paths(paths);
  if (blend.size() == 1) {
    GptDatasetSpec one = spec;
    one.prefix = blend[0].prefix;
    return std::make_unique<GptDataset>(one, log);
  }
  double first_weight = 0;
  if (!parse_weight(paths[0], first_weight)) {
    double total = 0;
    for (WeightedPrefix& p : blend) total += p.weight = static_cast<double>(split_tokens(p.prefix, spec));
    KILN_CHECK(total > 0, std::string("data: the ") + split_name(spec.which) +
                              " split of every dataset in data.paths is empty");
    for (WeightedPrefix& p : blend) p.weight /= total;
  }
  std::vector<std::unique_ptr<GptDataset>> parts;
  std::vector<double> weights;
  for (const WeightedPrefix& p : blend) {
    if (p.weight == 0) continue;  // an unweighted dataset whose split is empty
    GptDatasetSpec part = spec;
    part.prefix = p.prefix;
    part.num_samples = static_cast<int64_t>(
        std::ceil(std::ceil(static_cast<double>(spec.num_samples) * p.weight) * kSurplus));
    parts.push_back(std::make_unique<GptDataset>(part, log));
    weights.push_back(p.weight);
  }
  return std::make_unique<BlendedDataset>(std::move(parts), std::move(weights), spec.num_samples,
                                          cache_dir_for(blend[0].prefix, spec.cache_dir),
                                          spec.which, log);
}

BlendedDataset::BlendedDataset(std::vector<std::unique_ptr<GptDataset>> parts,
                               std::vector<double> weights, int64_t size,
                               const std::string& cache_dir, Split split, std::FILE* log)
    : parts_(std::move(parts)), weights_(std::move(weights)) {
  nlohmann::json description = {{"class", "BlendedDataset"}, {"size", size}, {"weights", weights_}};
  for (const auto& part : parts_) description["datasets"].push_back(part->cache_stem());
  IndexCache cache(cache_dir, "blend", split_name(split), description);
  bool built = !cache.complete();
  std::string damage = cache.damage();
  if (!built) {
    try {
      open_indices(cache, size);
    } catch (const Error& e) {
      damage = e.what();
      built = true;
    }
  }
  if (!damage.empty() && log) std::fprintf(log, "kiln: data: rebuilding a damaged index cache (%s)\n", damage.c_str());
  if (built) {
    std::vector<int16_t> dataset;
    std::vector<int64_t> dataset_sample;
    build_blending_indices(weights_, size, dataset, dataset_sample);
    write_npy<int16_t>(cache.array_path("dataset_index"), dataset, {size});
    write_npy<int64_t>(cache.array_path("dataset_sample_index"), dataset_sample, {size});
    cache.write_description(nlohmann::json::object());
    open_indices(cache, size);
  }
  if (log)
    std::fprintf(log, "kiln: data %s: %s the blend of %zu datasets, %lld samples, %s\n",
                 split_name(split), built ? "built" : "loaded", parts_.size(),
                 static_cast<long long>(size), (cache.stem() + "*").c_str());
}

void BlendedDataset::open_indices(const IndexCache& cache, int64_t size) {
  dataset_file_ = NpyArray::open<int16_t>(cache.array_path("dataset_index"));
  dataset_sample_file_ = NpyArray::open<int64_t>(cache.array_path("dataset_sample_index"));
  dataset_ = dataset_file_.values<int16_t>();
  dataset_sample_ = dataset_sample_file_.values<int64_t>();
  KILN_CHECK(static_cast<int64_t>(dataset_.size()) == size &&
                 static_cast<int64_t>(dataset_sample_.size()) == size,
             cache.stem() + "*.npy: blend index shapes do not match");
  for (size_t i = 0; i < dataset_.size(); ++i) {
    const auto d = static_cast<size_t>(dataset_[i]);
    KILN_CHECK(d < parts_.size() && dataset_sample_[i] >= 0 &&
                   dataset_sample_[i] < parts_[d]->num_samples(),
               cache.stem() + "*.npy: blend sample " + std::to_string(i) + " is out of range");
  }
}

void BlendedDataset::sample(int64_t index, int32_t* out) const {
  KILN_CHECK(index >= 0 && index < num_samples(),
             "data: blend sample " + std::to_string(index) + " is outside its " +
                 std::to_string(num_samples()));
  const auto i = static_cast<size_t>(index);
  parts_[static_cast<size_t>(dataset_[i])]->sample(dataset_sample_[i], out);
}

bool BlendedDataset::has_loss_mask() const {
  return std::any_of(parts_.begin(), parts_.end(), [](const auto& part) { return part->has_loss_mask(); });
}

void BlendedDataset::loss_mask(int64_t index, int32_t* out) const {
  const auto i = static_cast<size_t>(index);
  const GptDataset& part = *parts_[static_cast<size_t>(dataset_[i])];
  if (part.has_loss_mask()) {
    part.loss_mask(dataset_sample_[i], out);
  } else {
    std::fill(out, out + part.window(), 1);
  }
}

int64_t BlendedDataset::num_tokens() const {
  int64_t total = 0;
  for (const auto& part : parts_) total += part->num_tokens();
  return total;
}

int32_t BlendedDataset::max_token_id() const {
  int32_t max_id = 0;
  for (const auto& part : parts_) max_id = std::max(max_id, part->max_token_id());
  return max_id;
}

std::string BlendedDataset::describe() const {
  std::string out = "blend of";
  for (size_t d = 0; d < parts_.size(); ++d)
    out += fmt::format("{} {:.3g} x {}", d ? ";" : "", weights_[d], parts_[d]->describe());
  return out;
}

}  // namespace kiln
