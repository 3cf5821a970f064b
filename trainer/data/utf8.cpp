#include "trainer/data/utf8.h"

#include <fmt/core.h>

namespace kiln {

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

}  // namespace kiln
