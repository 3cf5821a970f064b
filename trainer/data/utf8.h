// UTF-8 validity, for the tokenizers that read text as Unicode (BPE): they refuse other
// bytes rather than guess an encoding, and say where the first bad byte is.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/check.h"
#include "store/user_text.h"

namespace kiln {

// Text that is not UTF-8; `offset` is the first bad byte's, from the start of the text
// that was checked, so a caller reading a file can add where that text began.
struct InvalidUtf8 : Error {
  InvalidUtf8(size_t offset, unsigned char byte);
  size_t offset;
  unsigned char byte;
};

// The offset of the first ill-formed byte, or npos: the store's, which checks text at its door.
using store::invalid_utf8_offset;

// Throws InvalidUtf8 unless text is well-formed UTF-8.
void check_utf8(std::string_view text);

// The length of text without a trailing sequence that is cut short but could still be
// completed by the bytes that follow: where a stream read in chunks can be cut without
// splitting a character.
size_t utf8_complete_prefix(std::string_view text);

}  // namespace kiln
