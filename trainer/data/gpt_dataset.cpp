#include "trainer/data/gpt_dataset.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string_view>

#include "base/check.h"
#include "base/trim.h"
#include "trainer/data/gpt_indices.h"
#include "trainer/data/loss_mask.h"

namespace kiln {
namespace {

// "98,2,0" -> {0.98, 0.02, 0.0}: 1 to 3 non-negative numbers, missing ones 0, normalised
// as Megatron normalises them (divided by their sum, summed left to right).
std::array<double, 3> parse_weights(const std::string& weights) {
  const std::string bad = "data: split \"" + weights + "\" ";
  std::array<double, 3> w{0.0, 0.0, 0.0};
  size_t count = 0, at = 0;
  while (true) {
    const size_t comma = weights.find(',', at);
    const std::string field(trim_blanks(std::string_view(weights).substr(at, comma - at)));
    if (count == 3) fail(bad + "has more than three weights (train, valid, test)");
    char* end = nullptr;
    const double v = field.empty() ? -1.0 : std::strtod(field.c_str(), &end);
    if (field.empty() || end != field.c_str() + field.size() || !std::isfinite(v) || v < 0.0) {
      fail(bad + "is malformed: \"" + field +
           "\" is not a non-negative number (expected e.g. \"98,2,0\")");
    }
    w[count++] = v;
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  double sum = 0.0;
  for (double v : w) sum += v;
  if (sum <= 0.0) fail(bad + "has no positive weight");
  for (double& v : w) v /= sum;
  return w;
}

// Bumped when the arrays' meaning changes, so caches of an older kiln are built again.
constexpr int kIndexFormat = 1;

}  // namespace

std::vector<int64_t> split_boundaries(const std::string& weights, int64_t num_documents) {
  const std::array<double, 3> w = parse_weights(weights);
  std::vector<int64_t> bounds{0};
  double cumulative = 0.0;
  for (double v : w) {
    cumulative += v;
    // nearbyint in the default rounding mode rounds half to even, as Python's round().
    const auto b =
        static_cast<int64_t>(std::nearbyint(cumulative * static_cast<double>(num_documents)));
    bounds.push_back(std::clamp<int64_t>(b, bounds.back(), num_documents));
  }
  bounds.back() = num_documents;  // the cumulative sum may fall a hair short of 1
  return bounds;
}

GptDataset::GptDataset(const GptDatasetSpec& spec, std::FILE* log)
    : spec_(spec), data_(spec.prefix), mask_(open_loss_mask(data_)) {
  const char* split = split_name(spec.which);
  KILN_CHECK(spec.seq_len >= 1, "data: seq_len must be at least 1, got " + std::to_string(spec.seq_len));
  KILN_CHECK(spec.num_samples >= 0,
             "data: asked for " + std::to_string(spec.num_samples) + " samples of " + split);
  const std::array<double, 3> weights = parse_weights(spec.split);
  if (weights[static_cast<size_t>(spec.which)] == 0.0) {
    fail(std::string("data: the ") + split + " split has weight 0 in split \"" + spec.split +
         "\", so it holds no documents");
  }
  const std::vector<int64_t> bounds = split_boundaries(spec.split, data_.num_documents());
  first_document_ = bounds[static_cast<size_t>(spec.which)];
  last_document_ = bounds[static_cast<size_t>(spec.which) + 1];
  KILN_CHECK(last_document_ <= std::numeric_limits<int32_t>::max(),
             "data: " + spec.prefix + " has more documents than a document index holds (2^31 - 1)");
  if (last_document_ > first_document_)
    num_tokens_ = data_.document_tokens(last_document_ - 1).second -
                  data_.document_tokens(first_document_).first;
  if (num_tokens_ < static_cast<int64_t>(spec.seq_len) + 1) {
    fail(std::string("data: the ") + split + " split of " + spec.prefix + " has " +
         std::to_string(num_tokens_) + " tokens, fewer than one sample of seq_len + 1 = " +
         std::to_string(spec.seq_len + 1));
  }
  if (spec_.num_samples == 0) spec_.num_samples = (num_tokens_ - 1) / spec.seq_len;
  plan_ = plan_epochs(num_tokens_, spec_.num_samples, spec.seq_len);

  IndexCache cache(cache_dir_for(spec.prefix, spec.cache_dir),
                   std::filesystem::path(spec.prefix).filename().string(), split, description());
  cache_stem_ = cache.stem();
  const auto start = std::chrono::steady_clock::now();
  bool built = false;
  std::string damage = cache.damage();
  if (cache.complete()) {
    try {
      load(cache);
    } catch (const Error& e) {
      damage = e.what();
      built = true;
    }
  } else {
    built = true;
  }
  if (!damage.empty() && log) std::fprintf(log, "kiln: data: rebuilding a damaged index cache (%s)\n", damage.c_str());
  if (built) {
    build(cache);
    load(cache);
  }
  if (log) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(log, "kiln: data %s: %s indices of %lld samples (%lld epoch%s) %s %sdescription.json in %.2f s\n",
                 split, built ? "built" : "loaded", static_cast<long long>(num_samples()),
                 static_cast<long long>(plan_.num_epochs), plan_.num_epochs == 1 ? "" : "s",
                 built ? "into" : "from", cache_stem_.c_str(), seconds);
  }
}

nlohmann::json GptDataset::description() const {
  std::error_code error;
  const auto idx_bytes = std::filesystem::file_size(spec_.prefix + ".idx", error);
  return {{"class", "GPTDataset"},
          {"format", kIndexFormat},
          {"prefix", std::filesystem::absolute(spec_.prefix).lexically_normal().string()},
          {"idx_bytes", error ? 0 : idx_bytes},
          {"documents", data_.num_documents()},
          {"tokens", data_.num_tokens()},
          {"split", spec_.split},
          {"split_documents", {first_document_, last_document_}},
          {"num_samples", spec_.num_samples},
          {"seq_len", spec_.seq_len},
          {"seed", spec_.seed}};
}

void GptDataset::build(IndexCache& cache) {
  std::vector<int32_t> documents;
  std::vector<int64_t> sizes(static_cast<size_t>(last_document_), 0);
  for (int64_t d = first_document_; d < last_document_; ++d) {
    documents.push_back(static_cast<int32_t>(d));
    const auto [begin, end] = data_.document_tokens(d);
    sizes[static_cast<size_t>(d)] = end - begin;
  }
  // One generator, drawn from in Megatron's order: documents first, then samples.
  NumpyRandomState rng(spec_.seed);
  const std::vector<int32_t> document_index = build_document_index(documents, plan_, rng);
  const std::vector<int64_t> sample_index =
      build_sample_index(sizes, document_index, plan_, spec_.seq_len);
  const int64_t samples = static_cast<int64_t>(sample_index.size()) / 2 - 1;
  const std::vector<int64_t> shuffle = build_shuffle_index(samples, plan_, rng);

  write_npy<int32_t>(cache.array_path("document_index"), document_index,
                     {static_cast<int64_t>(document_index.size())});
  write_npy<int64_t>(cache.array_path("sample_index"), sample_index, {samples + 1, 2});
  write_npy<int64_t>(cache.array_path("shuffle_index"), shuffle, {samples});
  cache.write_description({{"max_token_id", scan_max_token()},
                           {"num_epochs", plan_.num_epochs},
                           {"separate_final_epoch", plan_.separate_final_epoch},
                           {"tokens_per_epoch", num_tokens_},
                           {"samples", samples}});
}

void GptDataset::load(const IndexCache& cache) {
  document_index_file_ = NpyArray::open<int32_t>(cache.array_path("document_index"));
  sample_index_file_ = NpyArray::open<int64_t>(cache.array_path("sample_index"));
  shuffle_index_file_ = NpyArray::open<int64_t>(cache.array_path("shuffle_index"));
  document_index_ = document_index_file_.values<int32_t>();
  sample_index_ = sample_index_file_.values<int64_t>();
  shuffle_ = shuffle_index_file_.values<int64_t>();
  max_token_id_ = cache.stored()["facts"].value("max_token_id", -1);
  check_indices();
}

// The arrays come from a file; a sample read must never leave them or the data, so they
// are checked whole once (a few ms per million samples) rather than trusted.
void GptDataset::check_indices() const {
  const std::string where = cache_stem_ + "*.npy";
  const int64_t samples = static_cast<int64_t>(shuffle_.size());
  KILN_CHECK(static_cast<int64_t>(document_index_.size()) == num_documents() * plan_.num_epochs &&
                 sample_index_file_.shape() == (std::vector<int64_t>{samples + 1, 2}) &&
                 samples >= spec_.num_samples && max_token_id_ >= 0,
             where + ": index shapes do not match the data");
  for (int32_t d : document_index_)
    KILN_CHECK(d >= first_document_ && d < last_document_, where + ": document out of the split");
  const int64_t positions = static_cast<int64_t>(document_index_.size());
  for (size_t k = 0; k < sample_index_.size(); k += 2)
    KILN_CHECK(sample_index_[k] >= 0 && sample_index_[k] < positions && sample_index_[k + 1] >= 0,
               where + ": sample index out of range");
  for (int64_t j : shuffle_)
    KILN_CHECK(j >= 0 && j < samples, where + ": shuffle index out of range");
}

int32_t GptDataset::scan_max_token() const {
  return data_.max_token(data_.document_tokens(first_document_).first, num_tokens_,
                         std::string("the ") + split_name(spec_.which) + " split of " + spec_.prefix);
}

void GptDataset::sample(int64_t index, int32_t* out) const { read_window(data_, index, out); }

void GptDataset::loss_mask(int64_t index, int32_t* out) const {
  KILN_CHECK(mask_.has_value(), "data: " + spec_.prefix + " has no loss mask");
  read_window(*mask_, index, out);
}

void GptDataset::read_window(const IndexedDataset& from, int64_t index, int32_t* out) const {
  KILN_CHECK(index >= 0 && index < num_samples(),
             "data: sample " + std::to_string(index) + " of " + split_name(spec_.which) +
                 " is outside the " + std::to_string(num_samples()) + " its indices hold");
  const auto k = static_cast<size_t>(shuffle_[static_cast<size_t>(index)]);
  size_t position = static_cast<size_t>(sample_index_[2 * k]);
  int64_t offset = sample_index_[2 * k + 1];
  // seq_len + 1 tokens from (position, offset) on, document after document.
  int64_t wanted = window();
  while (wanted > 0) {
    KILN_CHECK(position < document_index_.size(), cache_stem_ + "*.npy: a sample runs past the "
                                                                "end of its document index");
    const auto [begin, end] = from.document_tokens(document_index_[position]);
    const int64_t n = std::min(wanted, end - begin - offset);
    from.read(begin + offset, n, out);
    out += n;
    wanted -= n;
    ++position;
    offset = 0;
  }
}

std::string GptDataset::describe() const {
  return spec_.prefix + " " + split_name(spec_.which) + ": " + std::to_string(num_documents()) +
         " documents, " + std::to_string(num_tokens_) + " tokens, " +
         std::to_string(num_samples()) + " samples over " + std::to_string(plan_.num_epochs) +
         (plan_.num_epochs == 1 ? " epoch" : " epochs") + (mask_ ? ", loss mask" : "");
}

}  // namespace kiln
