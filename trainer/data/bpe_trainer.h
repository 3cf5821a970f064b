// Learns a byte-level BPE from text, the way GPT-2's was learned: the text is split into
// pieces by the pre-tokenisation regex and counted; the 256 bytes are the first tokens;
// then, again and again, the pair of neighbouring tokens seen most often (counting each
// piece as often as it occurs) is merged into a new token, until the vocabulary is full.
// Pair counts are kept up to date as merges happen, touching only the pieces that hold
// the merged pair, so a merge costs what it changes rather than a recount of the corpus.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "trainer/data/bpe_model.h"
#include "trainer/data/pretokenizer.h"

namespace kiln {

struct BpeTrainOptions {
  int32_t vocab_size = 0;     // ids in all: 256 bytes, the merges, then <|endoftext|>
  int64_t min_frequency = 2;  // a pair seen fewer times than this is never merged
};

// What train() reports after each merge.
struct BpeTrainProgress {
  int64_t merges_done = 0;
  int64_t merges_wanted = 0;
  int64_t count = 0;  // how often the pair just merged was seen
  std::string token;  // the token it made, as raw bytes
};

class BpeTrainer {
 public:
  explicit BpeTrainer(const std::string& pattern = Pretokenizer::kGpt2Pattern);

  // Counts the pieces of text, which must be UTF-8 (InvalidUtf8 otherwise) and must not
  // cut a piece that goes on in the next call (add_file cuts where that cannot happen).
  void add_text(std::string_view text);
  // Streams a file through add_text in bounded memory. Throws kiln::Error naming the file
  // and the offset of its first byte that is not UTF-8.
  void add_file(const std::string& path);
  // Streams a JSONL file, one document a line, counting the text under `key` of each (a
  // piece never spans two documents). A bad line is a kiln::Error naming FILE:LINE.
  void add_jsonl_file(const std::string& path, const std::string& key);

  int64_t bytes() const { return bytes_; }
  int64_t pieces() const { return pieces_; }
  size_t distinct_pieces() const { return counts_.size(); }

  // The learned model: ids 0..255 are the bytes in order, then one id per merge (a merge
  // whose token some earlier merge already made reuses that id), then <|endoftext|>,
  // the end-of-document id, last. Stops early when no pair is seen min_frequency times.
  // Ties between pairs seen equally often go to the pair of older tokens (the lower left
  // id, then the lower right id), so the result never depends on hash or thread order.
  BpeModel train(const BpeTrainOptions& options,
                 const std::function<void(const BpeTrainProgress&)>& progress = {}) const;

 private:
  Pretokenizer pretokenizer_;
  std::unordered_map<std::string, int64_t> counts_;  // piece bytes -> occurrences
  int64_t bytes_ = 0, pieces_ = 0;
};

}  // namespace kiln
