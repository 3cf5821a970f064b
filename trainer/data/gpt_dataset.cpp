#include "trainer/data/gpt_dataset.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "kernels/check.h"

namespace kiln {
namespace {

// splitmix64's output function: a fast, well-mixed 64-bit hash. We write our own RNG
// rather than use <random> distributions or std::shuffle, whose results differ between
// standard libraries, so a seed picks the same samples on every machine.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A seeded pseudo-random permutation of [0, n), evaluated one element at a time: a
// balanced Feistel network over the smallest 2^(2h) >= n, cycle-walked until the value
// lands inside [0, n) (a permutation restricted this way stays a permutation; the domain
// is under 4n, so that takes fewer than 4 steps on average). Unlike a Fisher-Yates table
// it needs no memory and no state, so any rank can map any index, a resumed run needs
// nothing saved, and reading samples from several threads is safe.
class Permutation {
 public:
  Permutation(uint64_t n, uint64_t key) : n_(n) {
    while ((uint64_t{1} << (2 * half_bits_)) < n && half_bits_ < 32) ++half_bits_;
    mask_ = (half_bits_ == 32) ? 0xffffffffULL : (uint64_t{1} << half_bits_) - 1;
    for (size_t r = 0; r < keys_.size(); ++r) key = keys_[r] = mix64(key + r);
  }

  uint64_t operator()(uint64_t i) const {
    uint64_t x = i;
    do x = round_trip(x);
    while (x >= n_);
    return x;
  }

 private:
  uint64_t round_trip(uint64_t x) const {
    uint64_t left = x >> half_bits_, right = x & mask_;
    for (uint64_t key : keys_) {
      const uint64_t next = left ^ (mix64(right ^ key) & mask_);
      left = right;
      right = next;
    }
    return (left << half_bits_) | right;
  }

  uint64_t n_;
  int half_bits_ = 1;
  uint64_t mask_ = 1;
  std::array<uint64_t, 6> keys_{};  // six rounds: well past the four that make it pseudo-random
};

std::string trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return "";
  const auto last = s.find_last_not_of(" \t");
  return std::string(s.substr(first, last - first + 1));
}

// "98,2,0" -> {0.98, 0.02, 0.0}: 1 to 3 non-negative numbers, missing ones 0, normalised
// as Megatron normalises them (divided by their sum, summed left to right).
std::array<double, 3> parse_weights(const std::string& weights) {
  const std::string bad = "data: split \"" + weights + "\" ";
  std::array<double, 3> w{0.0, 0.0, 0.0};
  size_t count = 0, at = 0;
  while (true) {
    const size_t comma = weights.find(',', at);
    const std::string field = trim(std::string_view(weights).substr(at, comma - at));
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

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : " + ") + name;
  return out;
}

}  // namespace

const char* split_name(Split split) {
  switch (split) {
    case Split::Train:
      return "train";
    case Split::Valid:
      return "valid";
    case Split::Test:
      return "test";
  }
  return "?";
}

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

GptDataset::GptDataset(const std::vector<std::string>& prefixes, const std::string& split_weights,
                       Split which, int seq_len, uint64_t seed)
    : split_(which), seq_len_(seq_len), seed_(seed) {
  KILN_CHECK(!prefixes.empty(), "data: no dataset paths given");
  KILN_CHECK(seq_len >= 1, "data: seq_len must be at least 1, got " + std::to_string(seq_len));
  const int s = static_cast<int>(which);
  const std::array<double, 3> weights = parse_weights(split_weights);
  if (weights[static_cast<size_t>(s)] == 0.0) {
    fail(std::string("data: the ") + split_name(which) + " split has weight 0 in split \"" +
         split_weights + "\", so it holds no documents");
  }

  int64_t documents = 0;
  for (const auto& prefix : prefixes) {
    datasets_.emplace_back(prefix);
    documents += datasets_.back().num_documents();
  }
  const std::vector<int64_t> bounds = split_boundaries(split_weights, documents);
  const int64_t first_doc = bounds[static_cast<size_t>(s)],
                last_doc = bounds[static_cast<size_t>(s) + 1];

  // The split's documents [first_doc, last_doc) of the concatenated corpus fall into each
  // dataset as one contiguous document range, hence one contiguous token range.
  int64_t doc_base = 0;
  for (size_t d = 0; d < datasets_.size(); ++d) {
    const IndexedDataset& ds = datasets_[d];
    const int64_t lo = std::max<int64_t>(first_doc - doc_base, 0);
    const int64_t hi = std::min<int64_t>(last_doc - doc_base, ds.num_documents());
    doc_base += ds.num_documents();
    if (lo >= hi) continue;
    const int64_t begin = ds.document_tokens(lo).first, end = ds.document_tokens(hi - 1).second;
    if (end > begin) {
      ranges_.push_back({d, begin, end - begin, num_tokens_});
      num_tokens_ += end - begin;
    }
  }

  if (num_tokens_ < static_cast<int64_t>(seq_len) + 1) {
    fail(std::string("data: the ") + split_name(which) + " split of " + join(prefixes) + " has " +
         std::to_string(num_tokens_) +
         " tokens, fewer than one sample of seq_len + 1 = " + std::to_string(seq_len + 1));
  }
  num_samples_ = (num_tokens_ - 1) / seq_len;
  max_token_id_ = scan_max_token();
}

int32_t GptDataset::scan_max_token() const {
  // One pass over the split in bounded pieces; also catches negative ids, which only a
  // signed-dtype file from elsewhere could hold.
  constexpr int64_t kPiece = 1 << 20;
  std::vector<int32_t> buffer(static_cast<size_t>(std::min(kPiece, num_tokens_)));
  int32_t max_id = 0;
  for (int64_t at = 0; at < num_tokens_; at += kPiece) {
    const int64_t n = std::min(kPiece, num_tokens_ - at);
    read_stream(at, n, buffer.data());
    const auto [lo, hi] = std::minmax_element(buffer.begin(), buffer.begin() + n);
    if (*lo < 0) {
      fail("data: the " + std::string(split_name(split_)) + " split holds a negative token id " +
           std::to_string(*lo) + " (corrupt data?)");
    }
    max_id = std::max(max_id, *hi);
  }
  return max_id;
}

int64_t GptDataset::sample_position(int64_t index) const {
  KILN_CHECK(index >= 0, "data: negative sample index " + std::to_string(index));
  const auto n = static_cast<uint64_t>(num_samples_);
  const uint64_t epoch = static_cast<uint64_t>(index) / n,
                 within = static_cast<uint64_t>(index) % n;
  if (split_ != Split::Train) return static_cast<int64_t>(within);
  // A fresh key per (seed, epoch): each epoch is its own permutation.
  const Permutation perm(n, mix64(seed_ ^ mix64(epoch)));
  return static_cast<int64_t>(perm(within));
}

void GptDataset::sample(int64_t index, int32_t* out) const {
  const int64_t k = sample_position(index);
  read_stream(k * seq_len_, static_cast<int64_t>(seq_len_) + 1, out);
}

void GptDataset::read_stream(int64_t position, int64_t count, int32_t* out) const {
  // The last range starting at or before `position`, then onward across ranges.
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), position,
                             [](int64_t pos, const Range& r) { return pos < r.start; });
  --it;
  while (count > 0) {
    const int64_t skip = position - it->start;
    const int64_t n = std::min(count, it->length - skip);
    datasets_[it->dataset].read(it->begin + skip, n, out);
    out += n;
    position += n;
    count -= n;
    ++it;
  }
}

}  // namespace kiln
