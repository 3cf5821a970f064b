// SHA-256 of a byte string, and digests as lowercase hex (OpenSSL's libcrypto).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kiln {

std::string sha256_hex(std::string_view bytes);

// Bytes as lowercase hex, two digits each.
std::string hex_of(const unsigned char* bytes, size_t count);

}  // namespace kiln
