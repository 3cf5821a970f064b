// The byte tokenizer: every byte of UTF-8 (or any) text is one token, plus one
// end-of-document token. It needs no vocabulary file, so the tiny demo and the tests
// can train on any text; the vocabulary is 257 ids.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class ByteTokenizer {
 public:
  static constexpr int32_t kEod = 256;  // end of document, appended by `data prepare --append-eod`
  static constexpr int kVocabSize = 257;  // bytes 0..255 and kEod

  // One id per byte, in order. Stateless, so encoding a text in chunks gives the same
  // ids as encoding it whole.
  std::vector<int32_t> encode(std::string_view text) const;

  // The bytes of ids 0..255, in order. kEod and ids outside 0..255 produce nothing:
  // a decoded sample reads as the text it came from, with document ends dropped.
  std::string decode(std::span<const int32_t> ids) const;

  std::string name() const { return "byte"; }
};

}  // namespace kiln
