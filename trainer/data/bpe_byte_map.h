// GPT-2's byte-to-unicode map (encoder.py's bytes_to_unicode): every byte is shown as one
// printable code point, so a byte-level token can be written as a string in vocab.json
// and merges.txt (a space is "Ġ", a newline "Ċ"). The 188 printable Latin-1 bytes stand
// for themselves; the other 68 take U+0100 onwards, in byte order.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kiln {

// The mapped form of raw bytes, as UTF-8.
std::string bytes_to_unicode(std::string_view bytes);

// The raw bytes of a mapped token, or nullopt when a character of it stands for no
// byte (a token such as "<|endoftext|>" maps, but one with a real space does not).
std::optional<std::string> unicode_to_bytes(std::string_view token);

}  // namespace kiln
