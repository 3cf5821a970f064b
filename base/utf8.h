// UTF-8 validity: the store checks text at its door with it, and the tokenizers the text they
// read (they refuse other bytes rather than guess an encoding, and say where the first bad
// byte is).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/check.h"

namespace kiln {

// The offset of the first byte that does not begin or continue a well-formed UTF-8
// sequence (overlong forms, surrogates, code points past U+10FFFF and sequences cut short
// are all ill-formed), or std::string_view::npos when the whole text is valid. The store
// checks text at its door with it, and the tokenizers the text they read.
size_t invalid_utf8_offset(std::string_view text);
bool is_valid_utf8(std::string_view text);

// The code point of one whole, well-formed UTF-8 character (its 1 to 4 bytes).
char32_t code_point_of(std::string_view character);

// Text nobody typed (a model's sample, whose last token may end inside a character) made
// storable instead of refused: each ill-formed byte becomes U+FFFD, and the text is cut at a
// character boundary to at most max_bytes.
std::string storable_text(std::string_view text, size_t max_bytes);

// Text that is not UTF-8; `offset` is the first bad byte's, from the start of the text
// that was checked, so a caller reading a file can add where that text began.
struct InvalidUtf8 : Error {
  InvalidUtf8(size_t offset, unsigned char byte);
  size_t offset;
  unsigned char byte;
};

// Throws InvalidUtf8 unless text is well-formed UTF-8.
void check_utf8(std::string_view text);

// The length of text without a trailing sequence that is cut short but could still be
// completed by the bytes that follow: where a stream read in chunks can be cut without
// splitting a character.
size_t utf8_complete_prefix(std::string_view text);

}  // namespace kiln
