// Byte-level BPE as GPT-2 defines it: the text is split into pieces by the
// pre-tokenisation regex, each piece's UTF-8 bytes start as one token each, and the
// merges join neighbouring tokens, lowest rank first, until none applies. Added tokens sit
// outside BPE and are matched whole first: the special ones when the caller allows them, the
// others always.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "trainer/data/bpe_model.h"
#include "trainer/data/bpe_piece_cache.h"
#include "trainer/data/pretokenizer.h"
#include "trainer/data/tokenizer.h"

namespace kiln {

class BpeTokenizer : public Tokenizer {
 public:
  // Checks the model: ids unique, a token for every byte, each merge joining two tokens
  // into a token. Throws kiln::Error naming `name` (where the model came from).
  BpeTokenizer(const BpeModel& model, std::string name);

  std::string name() const override { return name_; }
  int32_t vocab_size() const override { return static_cast<int32_t>(id_bytes_.size()); }
  int32_t eod() const override { return eod_; }
  int32_t bos() const override { return bos_; }
  bool adds_bos() const override { return add_bos_; }
  int32_t pad() const override { return pad_ >= 0 ? pad_ : eod_; }
  // The pre-tokenizer's cut in the text after the last added token matched in any text (or
  // before that token); under NFC moved back to before an ASCII character, since composition
  // joins a character with the marks after it and no ASCII character is one.
  size_t stable_prefix(std::string_view text) const override;

 private:
  struct Merge {
    int32_t rank;
    int32_t id;  // the token the two become
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
  }

  void encode_into(std::string_view text, std::vector<int32_t>& ids,
                   bool allow_special) const override;
  std::string decode_ids(std::span<const int32_t> ids, bool skip_special) const override;
  // The added token text holds at byte i, the longest: any with allow_special, else one that
  // is not special; null when none.
  const SpecialToken* added_at(std::string_view text, size_t i, bool allow_special) const;
  // Text as the normalizer leaves it (NFC, into storage), or as it is.
  std::string_view normalized(std::string_view text, std::string& storage) const;
  // Text with no special tokens in it, already checked to be UTF-8.
  void encode_ordinary(std::string_view text, std::vector<int32_t>& ids) const;
  void encode_piece(std::string_view piece, std::vector<int32_t>& ids) const;
  // BPE proper on one piece of at least two bytes.
  void merge(std::string_view piece, std::vector<int32_t>& ids) const;

  std::string name_;
  int32_t eod_ = -1;
  int32_t bos_ = -1, pad_ = -1;
  bool add_bos_ = false;
  std::vector<std::string> id_bytes_;  // what each id decodes to ("" for an unused id)
  std::vector<bool> special_id_;       // the ids of the special tokens
  std::array<int32_t, 256> byte_id_{};
  std::unordered_map<uint64_t, Merge> merges_;
  std::unordered_map<std::string, int32_t> token_id_;  // only with ignore_merges
  bool ignore_merges_ = false;
  bool nfc_ = false;
  std::vector<SpecialToken> specials_;      // longest first, so the longest match wins
  bool plain_added_ = false;                // whether some added token is not special
  std::array<bool, 256> special_starts_{};  // whether some special token starts with a byte
  Pretokenizer pretokenizer_;
  mutable BpePieceCache cache_;
};

}  // namespace kiln
