// The tokenizer interface: text to ids and back. Two kinds implement it: the byte
// tokenizer (every byte one id, no files) and byte-level BPE (GPT-2's vocab.json +
// merges.txt, or a Hugging Face tokenizer.json). docs/tokenizers.md describes both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // What load_tokenizer was given: "byte" or the path of the files.
  virtual std::string name() const = 0;
  // One past the largest id: a model needs at least this many embedding rows.
  virtual int32_t vocab_size() const = 0;
  // The end-of-document id (GPT-2's <|endoftext|>, or the eos_token a Hugging Face
  // tokenizer_config.json names), appended by `data prepare --append-eod`.
  virtual int32_t eod() const = 0;
  // The begin-of-document id (tokenizer_config.json's bos_token), -1 when none; with
  // adds_bos() (its add_bos_token) a document's and a prompt's ids start with it, as Hugging
  // Face's tokenizer(text) starts them.
  virtual int32_t bos() const { return -1; }
  virtual bool adds_bos() const { return false; }
  // The id batches are padded with: tokenizer_config.json's pad_token, else the end of document.
  virtual int32_t pad() const { return eod(); }

  // Appends the ids of text to ids. A special token written in the text (GPT-2's
  // <|endoftext|>) becomes its id only with allow_special; otherwise it is encoded as
  // the text it is, so data cannot forge control tokens (tiktoken's rule). An added token
  // that is not special (Qwen3's <think>) becomes its id in any text. BPE refuses
  // text that is not UTF-8 with InvalidUtf8 (trainer/data/utf8.h); safe to call from
  // several threads at once.
  void encode(std::string_view text, std::vector<int32_t>& ids, bool allow_special = false) const {
    encode_into(text, ids, allow_special);
  }
  std::vector<int32_t> encode(std::string_view text) const {
    std::vector<int32_t> ids;
    encode_into(text, ids, false);
    return ids;
  }

  // The text of ids, concatenated: decode(encode(x)) == x for any text encode accepts.
  // Ids that stand for no token produce nothing, so a sample from a model whose
  // vocabulary is padded past the tokenizer's still decodes.
  std::string decode(std::span<const int32_t> ids) const { return decode_ids(ids, false); }
  // The same without the special tokens (Hugging Face's skip_special_tokens): the end of
  // document and the added tokens marked special drop out, the other added tokens stay.
  std::string decode_skipping_special(std::span<const int32_t> ids) const { return decode_ids(ids, true); }

  // A prefix of text whose ids do not depend on the text after it: encoding that prefix
  // and then the rest gives the ids of the whole (special tokens not allowed). Lets a long document
  // be encoded a chunk at a time in bounded memory. 0 when no such cut is known yet (keep reading).
  virtual size_t stable_prefix(std::string_view text) const = 0;

 private:
  virtual void encode_into(std::string_view text, std::vector<int32_t>& ids,
                           bool allow_special) const = 0;
  virtual std::string decode_ids(std::span<const int32_t> ids, bool skip_special) const = 0;
};

// A tokenizer from its spec:
//   byte                      the byte tokenizer (257 ids)
//   DIR                       a folder with GPT-2's vocab.json + merges.txt, or with a
//                             Hugging Face tokenizer.json
//   FILE.json                 a Hugging Face tokenizer.json
// Throws kiln::Error naming the spec and what is wrong with it.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& spec);

// Bytes of text each id decodes to, for ids [0, max(size, vocab_size())): what per-byte
// losses divide by. The end of document, and ids past the tokenizer's (vocabulary
// padding), stand for no text.
std::vector<int64_t> text_bytes_per_id(const Tokenizer& tokenizer, int64_t size);

}  // namespace kiln
