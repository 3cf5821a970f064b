// The byte tokenizer: every byte of UTF-8 (or any) text is one token, plus one
// end-of-document token. It needs no vocabulary file, so the tiny demo and the tests
// can train on any text; the vocabulary is 257 ids.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/data/tokenizer.h"

namespace kiln {

class ByteTokenizer : public Tokenizer {
 public:
  static constexpr int32_t kEod = 256;  // end of document, appended by `data prepare --append-eod`
  static constexpr int kVocabSize = 257;  // bytes 0..255 and kEod

  std::string name() const override { return "byte"; }
  int32_t vocab_size() const override { return kVocabSize; }
  int32_t eod() const override { return kEod; }

  // Stateless, so any cut is stable: encoding a text in chunks gives the ids of the whole.
  size_t stable_prefix(std::string_view text) const override { return text.size(); }

 private:
  // One id per byte, in order; any bytes, UTF-8 or not. The end-of-document id has no
  // text form, so there is nothing special to allow.
  void encode_into(std::string_view text, std::vector<int32_t>& ids,
                   bool allow_special) const override;
  // The bytes of ids 0..255, in order. kEod and ids outside 0..255 produce nothing, special
  // or not: a decoded sample reads as the text it came from, with document ends dropped.
  std::string decode_ids(std::span<const int32_t> ids, bool skip_special) const override;
};

}  // namespace kiln
