// Text written as a model produces it, one token's bytes at a time, without ever splitting
// a UTF-8 character: bytes that end in a sequence cut short are held back until the bytes
// that complete it arrive, or the stream ends. Bytes that are not UTF-8 at all (a byte-level
// model can produce them) pass through as they are, so the whole output is exactly the
// decoded tokens.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace kiln {

class TextStream {
 public:
  explicit TextStream(std::function<void(std::string_view)> write) : write_(std::move(write)) {}

  void add(std::string_view bytes);
  // Writes whatever is held back.
  void finish();

 private:
  std::function<void(std::string_view)> write_;
  std::string held_;
};

}  // namespace kiln
