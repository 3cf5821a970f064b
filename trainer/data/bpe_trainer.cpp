#include "trainer/data/bpe_trainer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <queue>
#include <unordered_set>
#include <vector>

#include <fmt/core.h>

#include "base/check.h"
#include "base/utf8.h"
#include "trainer/data/jsonl.h"

namespace kiln {
namespace {

constexpr size_t kTrainingReadChunk = size_t{1} << 20;
// A stretch of text with no place to cut (one run of letters, say) is cut here anyway, at
// a character boundary, so memory stays bounded on any input.
constexpr size_t kMaxHeld = size_t{64} << 20;

uint64_t pair_key(int32_t left, int32_t right) {
  return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
}
int32_t left_of(uint64_t key) { return static_cast<int32_t>(key >> 32); }
int32_t right_of(uint64_t key) { return static_cast<int32_t>(key & 0xffffffffu); }

struct Word {
  std::vector<int32_t> symbols;
  int64_t count;
};

struct MergeCandidate {
  int64_t count;
  uint64_t pair;
  // The heap's top is the most frequent pair; among equals, the lowest (left, right).
  bool operator<(const MergeCandidate& o) const {
    return count != o.count ? count < o.count : pair > o.pair;
  }
};

bool contains_pair(const std::vector<int32_t>& s, int32_t a, int32_t b) {
  for (size_t i = 0; i + 1 < s.size(); ++i)
    if (s[i] == a && s[i + 1] == b) return true;
  return false;
}

}  // namespace

BpeTrainer::BpeTrainer(const std::string& pattern) : pretokenizer_(pattern) {}

void BpeTrainer::add_text(std::string_view text) {
  check_utf8(text);
  std::vector<size_t> ends;
  pretokenizer_.split(text, ends);
  size_t begin = 0;
  for (const size_t end : ends) {
    ++counts_[std::string(text.substr(begin, end - begin))];
    begin = end;
  }
  bytes_ += static_cast<int64_t>(text.size());
  pieces_ += static_cast<int64_t>(ends.size());
}

void BpeTrainer::add_jsonl_file(const std::string& path, const std::string& key) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(fmt::format("tokenizer train: cannot open {}: {}", path, std::strerror(errno)));
  std::string line;
  uint64_t offset = 0;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    const uint64_t start = offset;
    offset += line.size() + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    add_text(jsonl_text(line, key, fmt::format("tokenizer train: {}:{}", path, number), start));
  }
}

void BpeTrainer::add_file(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rbe"), &std::fclose);
  if (!f) fail(fmt::format("tokenizer train: cannot open {}: {}", path, std::strerror(errno)));
  std::string held;          // text read but not yet counted
  uint64_t held_offset = 0;  // where `held` starts in the file
  const auto count = [&](size_t n) {
    try {
      add_text(std::string_view(held).substr(0, n));
    } catch (const InvalidUtf8& e) {
      fail(fmt::format("tokenizer train: {}: not valid UTF-8 at byte {} (0x{:02x})", path,
                       held_offset + e.offset, e.byte));
    }
    held.erase(0, n);
    held_offset += n;
  };
  std::string chunk(kTrainingReadChunk, '\0');
  while (true) {
    const size_t n = std::fread(chunk.data(), 1, chunk.size(), f.get());
    held.append(chunk.data(), n);
    if (n < chunk.size()) {
      if (std::ferror(f.get()))
        fail(fmt::format("tokenizer train: cannot read {}: {}", path, std::strerror(errno)));
      break;
    }
    size_t cut = 0;
    try {
      cut = pretokenizer_.stable_prefix(held);
    } catch (const InvalidUtf8& e) {
      fail(fmt::format("tokenizer train: {}: not valid UTF-8 at byte {} (0x{:02x})", path,
                       held_offset + e.offset, e.byte));
    }
    if (cut == 0 && held.size() >= kMaxHeld) cut = utf8_complete_prefix(held);
    if (cut > 0) count(cut);
  }
  count(held.size());
}

BpeModel BpeTrainer::train(const BpeTrainOptions& options,
                           const std::function<void(const BpeTrainProgress&)>& progress) const {
  KILN_CHECK(options.vocab_size >= 257,
             fmt::format("tokenizer train: --vocab-size {} is below 257 (256 bytes and {})",
                         options.vocab_size, kGpt2EndOfText));
  KILN_CHECK(options.min_frequency >= 1, "tokenizer train: --min-frequency must be at least 1");

  std::vector<std::string> tokens;  // id -> bytes
  std::unordered_map<std::string, int32_t> token_ids;
  for (int b = 0; b < 256; ++b) {
    tokens.emplace_back(1, static_cast<char>(b));
    token_ids.emplace(tokens.back(), b);
  }

  std::vector<Word> words;
  words.reserve(counts_.size());
  for (const auto& [piece, count] : counts_) {
    Word w{{}, count};
    for (const char c : piece) w.symbols.push_back(static_cast<unsigned char>(c));
    words.push_back(std::move(w));
  }

  // Every pair's count over the corpus, and the words that hold it (a word may be listed
  // after it no longer holds the pair; it is checked when used).
  std::unordered_map<uint64_t, int64_t> pair_counts;
  std::unordered_map<uint64_t, std::vector<uint32_t>> where;
  const auto note_word = [&](uint64_t pair, uint32_t w) {
    std::vector<uint32_t>& list = where[pair];
    if (list.empty() || list.back() != w) list.push_back(w);
  };
  for (uint32_t w = 0; w < words.size(); ++w) {
    const std::vector<int32_t>& s = words[w].symbols;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      const uint64_t pair = pair_key(s[i], s[i + 1]);
      pair_counts[pair] += words[w].count;
      note_word(pair, w);
    }
  }
  std::priority_queue<MergeCandidate> heap;
  for (const auto& [pair, count] : pair_counts) heap.push({count, pair});

  BpeModel model;
  const int64_t wanted = options.vocab_size - 257;
  std::vector<int32_t> merged;
  while (static_cast<int64_t>(model.merges.size()) < wanted && !heap.empty()) {
    const MergeCandidate top = heap.top();
    heap.pop();
    const int64_t now = pair_counts[top.pair];
    if (now != top.count) {  // counts only fall after an entry is pushed: this one is stale
      if (now > 0) heap.push({now, top.pair});
      continue;
    }
    if (now < options.min_frequency) break;

    const int32_t a = left_of(top.pair), b = right_of(top.pair);
    std::string bytes = tokens[static_cast<size_t>(a)] + tokens[static_cast<size_t>(b)];
    auto [it, made] = token_ids.try_emplace(bytes, static_cast<int32_t>(tokens.size()));
    const int32_t id = it->second;
    if (made) tokens.push_back(bytes);
    model.merges.emplace_back(tokens[static_cast<size_t>(a)], tokens[static_cast<size_t>(b)]);

    // Re-count only the words holding the pair: take their pairs out, merge, put the new
    // pairs back. Pairs with the new token are the only ones whose counts grow.
    std::unordered_set<uint64_t> grown;
    const std::vector<uint32_t> holders = std::move(where[top.pair]);
    where.erase(top.pair);
    for (const uint32_t w : holders) {
      Word& word = words[w];
      std::vector<int32_t>& s = word.symbols;
      if (!contains_pair(s, a, b)) continue;
      for (size_t i = 0; i + 1 < s.size(); ++i) pair_counts[pair_key(s[i], s[i + 1])] -= word.count;
      merged.clear();
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          merged.push_back(id);
          ++i;
        } else {
          merged.push_back(s[i]);
        }
      }
      s.swap(merged);
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        const uint64_t pair = pair_key(s[i], s[i + 1]);
        pair_counts[pair] += word.count;
        if (s[i] == id || s[i + 1] == id) {
          grown.insert(pair);
          note_word(pair, w);
        }
      }
    }
    for (const uint64_t pair : grown) heap.push({pair_counts[pair], pair});
    if (progress)
      progress({static_cast<int64_t>(model.merges.size()), wanted, now, std::move(bytes)});
  }

  for (size_t id = 0; id < tokens.size(); ++id)
    model.tokens.push_back({static_cast<int32_t>(id), tokens[id]});
  model.eod = static_cast<int32_t>(tokens.size());
  model.specials.push_back({model.eod, kGpt2EndOfText});
  model.pattern = pretokenizer_.pattern();
  return model;
}

}  // namespace kiln
