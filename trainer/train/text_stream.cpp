#include "trainer/train/text_stream.h"

#include "base/utf8.h"


namespace kiln {

void TextStream::add(std::string_view bytes) {
  held_.append(bytes);
  const size_t complete = utf8_complete_prefix(held_);
  if (complete == 0) return;
  write_(std::string_view(held_).substr(0, complete));
  held_.erase(0, complete);
}

void TextStream::finish() {
  if (!held_.empty()) write_(held_);
  held_.clear();
}

}  // namespace kiln
