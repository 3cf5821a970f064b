#include "trainer/data/byte_tokenizer.h"

namespace kiln {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    // Through unsigned char: bytes >= 0x80 must map to 128..255, not negative ids.
    ids[i] = static_cast<unsigned char>(text[i]);
  }
  return ids;
}

std::string ByteTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  text.reserve(ids.size());
  for (int32_t id : ids) {
    if (id >= 0 && id <= 255) text.push_back(static_cast<char>(static_cast<unsigned char>(id)));
  }
  return text;
}

}  // namespace kiln
