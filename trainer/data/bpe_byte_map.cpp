#include "trainer/data/bpe_byte_map.h"

#include <array>
#include <cstdint>

namespace kiln {
namespace {

bool stands_for_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

struct ByteMap {
  std::array<uint16_t, 256> code_point{};  // byte -> code point
  std::array<int16_t, 324> byte_of{};      // code point -> byte, -1 for none
  std::array<std::string, 256> utf8{};     // byte -> its code point as UTF-8

  ByteMap() {
    byte_of.fill(-1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const int cp = stands_for_itself(b) ? b : next++;
      code_point[static_cast<size_t>(b)] = static_cast<uint16_t>(cp);
      byte_of[static_cast<size_t>(cp)] = static_cast<int16_t>(b);
      std::string& s = utf8[static_cast<size_t>(b)];
      if (cp < 0x80) {
        s.push_back(static_cast<char>(cp));
      } else {
        s.push_back(static_cast<char>(0xc0 | (cp >> 6)));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
      }
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

std::string bytes_to_unicode(std::string_view bytes) {
  const ByteMap& map = byte_map();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out += map.utf8[static_cast<unsigned char>(c)];
  return out;
}

std::optional<std::string> unicode_to_bytes(std::string_view token) {
  const ByteMap& map = byte_map();
  std::string out;
  out.reserve(token.size());
  // Every mapped code point is below U+0800: one or two UTF-8 bytes.
  for (size_t i = 0; i < token.size();) {
    const auto c = static_cast<unsigned char>(token[i]);
    size_t cp = 0;
    if (c < 0x80) {
      cp = c;
      i += 1;
    } else if ((c & 0xe0) == 0xc0 && i + 1 < token.size() &&
               (static_cast<unsigned char>(token[i + 1]) & 0xc0) == 0x80) {
      cp = (size_t{c} & 0x1f) << 6 | (static_cast<unsigned char>(token[i + 1]) & 0x3f);
      i += 2;
    } else {
      return std::nullopt;
    }
    if (cp >= map.byte_of.size() || map.byte_of[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(static_cast<unsigned char>(map.byte_of[cp])));
  }
  return out;
}

}  // namespace kiln
