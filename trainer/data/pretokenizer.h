// Pre-tokenisation: the split of text into pieces (words, numbers, punctuation runs,
// whitespace) that BPE then merges within, never across. The default rule is GPT-2's
// regex; a Hugging Face tokenizer.json may name another. Matched with PCRE2 in UTF and
// Unicode-property mode (\p{L}, \s and friends cover all of Unicode), JIT compiled.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class Pretokenizer {
 public:
  // GPT-2's rule (encoder.py): contractions, an optional space and a run of letters, of
  // digits or of other symbols, and whitespace runs that leave their last space to the
  // word after them.
  static constexpr const char* kGpt2Pattern =
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

  // Throws kiln::Error naming the pattern when it does not compile.
  explicit Pretokenizer(const std::string& pattern = kGpt2Pattern);
  ~Pretokenizer();
  Pretokenizer(const Pretokenizer&) = delete;
  Pretokenizer& operator=(const Pretokenizer&) = delete;

  const std::string& pattern() const { return pattern_; }

  // Appends the end offset of each piece of text to `ends`, in order: the pieces are
  // [0, ends[0]), [ends[0], ends[1]), ... and the last ends at text.size(). Text the
  // pattern does not match becomes a piece of its own, as in Hugging Face's "Isolated"
  // split (GPT-2's pattern matches every character, so there it never happens). text
  // must be valid UTF-8, checked by the caller once for the whole text; safe to call
  // from several threads at once.
  void split(std::string_view text, std::vector<size_t>& ends) const;

  // A prefix of text whose pieces cannot change whatever text follows, and which splits
  // alone into the same pieces, so a stream can be pre-tokenised a chunk at a time by
  // cutting there: the end of the last piece that ends at least kLookahead bytes before
  // the end of text and whose last character is not whitespace. The last piece may still
  // grow (a run of letters); a pattern's alternatives look a few characters past a piece
  // (GPT-2's text ending in "'l" splits as "'" and "l", but "'ll" is one piece); and a
  // whitespace run splits by what follows it ("\n\n\t" before a word is "\n\n" and "\t",
  // at the end of the text one piece). 0 when there is no such piece. Throws InvalidUtf8
  // when text, less a character cut short at its end, is not UTF-8.
  static constexpr size_t kLookahead = 64;
  size_t stable_prefix(std::string_view text) const;

 private:
  struct Compiled;
  std::string pattern_;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace kiln
