#include "trainer/data/byte_tokenizer.h"

namespace kiln {

void ByteTokenizer::encode_into(std::string_view text, std::vector<int32_t>& ids,
                                bool /*allow_special*/) const {
  const size_t start = ids.size();
  ids.resize(start + text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    // Through unsigned char: bytes >= 0x80 must map to 128..255, not negative ids.
    ids[start + i] = static_cast<unsigned char>(text[i]);
  }
}

std::string ByteTokenizer::decode_ids(std::span<const int32_t> ids, bool /*skip_special*/) const {
  std::string text;
  text.reserve(ids.size());
  for (int32_t id : ids) {
    if (id >= 0 && id <= 255) text.push_back(static_cast<char>(static_cast<unsigned char>(id)));
  }
  return text;
}

}  // namespace kiln
