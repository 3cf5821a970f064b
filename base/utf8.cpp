#include "base/utf8.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <fmt/core.h>

namespace kiln {
namespace {

// The length of the well-formed sequence at text[i], or 0 when it is ill-formed or cut
// short (the table of well-formed byte sequences in the Unicode standard, section 3.9).
size_t sequence_length(std::string_view text, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const size_t left = text.size() - i;
  const unsigned char lead = b(0);
  const auto cont = [&](size_t k, unsigned char lo = 0x80, unsigned char hi = 0xbf) {
    return k < left && b(k) >= lo && b(k) <= hi;
  };
  if (lead < 0x80) return 1;
  if (lead < 0xc2) return 0;  // a continuation byte, or an overlong two-byte lead
  if (lead < 0xe0) return cont(1) ? 2 : 0;
  if (lead < 0xf0) {
    const unsigned char lo = lead == 0xe0 ? 0xa0 : 0x80;  // overlong
    const unsigned char hi = lead == 0xed ? 0x9f : 0xbf;  // surrogates
    return cont(1, lo, hi) && cont(2) ? 3 : 0;
  }
  if (lead < 0xf5) {
    const unsigned char lo = lead == 0xf0 ? 0x90 : 0x80;  // overlong
    const unsigned char hi = lead == 0xf4 ? 0x8f : 0xbf;  // past U+10FFFF
    return cont(1, lo, hi) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

size_t invalid_utf8_offset(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    // Most text is ASCII: skip it eight bytes at a time.
    if (i + 8 <= text.size()) {
      uint64_t word;
      std::memcpy(&word, text.data() + i, 8);
      if ((word & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    const size_t n = sequence_length(text, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

bool is_valid_utf8(std::string_view text) { return invalid_utf8_offset(text) == std::string_view::npos; }

std::string storable_text(std::string_view text, size_t max_bytes) {
  static constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  for (size_t i = 0; i < text.size();) {
    const size_t n = sequence_length(text, i);
    const std::string_view piece = n > 0 ? text.substr(i, n) : kReplacement;
    if (out.size() + piece.size() > max_bytes) break;
    out += piece;
    i += n > 0 ? n : 1;
  }
  return out;
}

InvalidUtf8::InvalidUtf8(size_t offset_, unsigned char byte_)
    : Error(fmt::format("text is not valid UTF-8: byte 0x{:02x} at offset {}", byte_, offset_)),
      offset(offset_),
      byte(byte_) {}

void check_utf8(std::string_view text) {
  const size_t bad = invalid_utf8_offset(text);
  if (bad != std::string_view::npos) throw InvalidUtf8(bad, static_cast<unsigned char>(text[bad]));
}

size_t utf8_complete_prefix(std::string_view text) {
  // A character is at most 4 bytes: look back at most 3 for the lead of the last one.
  const size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xc0) == 0x80) continue;  // a continuation byte: the lead is further back
    const size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    return need > back ? n - back : n;
  }
  return n;
}

char32_t code_point_of(std::string_view character) {
  const auto byte = [&](size_t i) { return static_cast<char32_t>(static_cast<unsigned char>(character[i])); };
  switch (character.size()) {
    case 1: return byte(0);
    case 2: return (byte(0) & 0x1f) << 6 | (byte(1) & 0x3f);
    case 3: return (byte(0) & 0x0f) << 12 | (byte(1) & 0x3f) << 6 | (byte(2) & 0x3f);
    default: return (byte(0) & 0x07) << 18 | (byte(1) & 0x3f) << 12 | (byte(2) & 0x3f) << 6 | (byte(3) & 0x3f);
  }
}

}  // namespace kiln
