#include "trainer/data/pretokenizer.h"

#include <fmt/core.h>

#include <cstdint>

// PCRE2's header wants its code unit width first: 8 bits, for UTF-8.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/check.h"
#include "base/utf8.h"

namespace kiln {

struct Pretokenizer::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

namespace {

// Match data holds the offsets of one match: one per call, since calls may run on several
// threads at once.
struct MatchData {
  explicit MatchData(const pcre2_code* code)
      : data(pcre2_match_data_create_from_pattern(code, nullptr)) {
    KILN_CHECK(data != nullptr, "pretokenizer: out of memory for PCRE2 match data");
  }
  ~MatchData() { pcre2_match_data_free(data); }
  pcre2_match_data* data;
};

// Whether the character that ends at text[end - 1] is whitespace as PCRE2's \s sees it
// in UCP mode (Unicode's White_Space property).
bool ends_in_whitespace(std::string_view text, size_t end) {
  size_t lead = end - 1;
  while (lead > 0 && (static_cast<unsigned char>(text[lead]) & 0xc0) == 0x80) --lead;
  const char32_t cp = code_point_of(text.substr(lead, end - lead));
  return (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
         cp == 0x205f || cp == 0x3000;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

Pretokenizer::Pretokenizer(const std::string& pattern)
    : pattern_(pattern), compiled_(std::make_unique<Compiled>()) {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                  PCRE2_UTF | PCRE2_UCP, &error, &error_offset, nullptr);
  if (compiled_->code == nullptr)
    fail(fmt::format("pretokenizer: the pattern {} does not compile at offset {}: {}", pattern,
                     error_offset, pcre2_message(error)));
  // Without JIT support (some platforms) the interpreter gives the same matches, slower.
  compiled_->jit = pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE) == 0;
}

Pretokenizer::~Pretokenizer() = default;

void Pretokenizer::split(std::string_view text, std::vector<size_t>& ends) const {
  if (text.empty()) return;
  const MatchData match(compiled_->code);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    // The caller checked the UTF-8 once; PCRE2 would otherwise re-check the whole text at
    // every match, which is quadratic.
    const int rc = compiled_->jit ? pcre2_jit_match(compiled_->code, subject, text.size(), pos,
                                                    PCRE2_NO_UTF_CHECK, match.data, nullptr)
                                  : pcre2_match(compiled_->code, subject, text.size(), pos,
                                                PCRE2_NO_UTF_CHECK, match.data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0)
      fail(fmt::format("pretokenizer: matching {} failed at byte {}: {}", pattern_, pos,
                       pcre2_message(rc)));
    const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.data);
    size_t begin = span[0], end = span[1];
    if (end == begin) {
      // A pattern that can match nothing: the text up to the next character is a gap.
      end = begin + 1;
      while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xc0) == 0x80) ++end;
      begin = end;
    }
    if (begin > pos) ends.push_back(begin);
    if (end > begin) ends.push_back(end);
    pos = end;
  }
  if (ends.empty() || ends.back() != text.size()) ends.push_back(text.size());
}

size_t Pretokenizer::stable_prefix(std::string_view text) const {
  const std::string_view whole = text.substr(0, utf8_complete_prefix(text));
  check_utf8(whole);
  if (whole.size() <= kLookahead) return 0;
  std::vector<size_t> ends;
  split(whole, ends);
  size_t cut = 0;
  for (const size_t end : ends) {
    if (end + kLookahead > whole.size()) break;
    if (!ends_in_whitespace(whole, end)) cut = end;
  }
  return cut;
}

}  // namespace kiln
