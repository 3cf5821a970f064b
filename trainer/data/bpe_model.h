// What defines a byte-level BPE tokenizer, as plain data: its tokens, its merges in rank
// order, its special tokens and its pre-tokenisation pattern. The file readers fill one
// (GPT-2's vocab.json + merges.txt, Hugging Face's tokenizer.json), the trainer learns
// one, and BpeTokenizer runs one.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trainer/data/pretokenizer.h"

namespace kiln {

// A token of the byte-level vocabulary: its id and the raw bytes it stands for (not
// GPT-2's printable form; trainer/data/bpe_byte_map.h converts).
struct BpeToken {
  int32_t id = 0;
  std::string bytes;
};

// A token that BPE never produces, matched whole in the text (Hugging Face's added tokens):
// a special one (GPT-2's <|endoftext|>, Qwen's <|im_start|>) only when the caller allows
// special tokens, another (Qwen3's <think>, Hugging Face's special: false) in any text, as
// Hugging Face's tokenizers match it.
struct SpecialToken {
  int32_t id = 0;
  std::string text;
  bool special = true;  // and so dropped by Tokenizer::decode_skipping_special
};

// GPT-2's end-of-document token, which the tokenizers kiln trains end with too.
inline constexpr const char* kGpt2EndOfText = "<|endoftext|>";

struct BpeModel {
  std::vector<BpeToken> tokens;
  // Merges, lowest rank (first applied) first: the raw bytes of the left and right token.
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<SpecialToken> specials;
  int32_t eod = -1;  // the id of the end-of-document token, one of specials
  // tokenizer_config.json's bos_token and pad_token (-1: none) and add_bos_token.
  int32_t bos = -1;
  int32_t pad = -1;
  bool add_bos = false;
  std::string pattern = Pretokenizer::kGpt2Pattern;
  // Hugging Face's ignore_merges (Llama 3): a piece that is a token is that token.
  bool ignore_merges = false;
  // The normalizer NFC (Qwen's): text is composed (Unicode NFC) before it is split and merged.
  bool nfc = false;
};

}  // namespace kiln
