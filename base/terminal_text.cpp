#include "base/terminal_text.h"

#include <fmt/core.h>

namespace kiln {
namespace {

std::string escaped(std::string_view text, bool keep_line_breaks) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    // C1 controls are U+0080..U+009F, in UTF-8 0xC2 followed by 0x80..0x9F.
    if (c == 0xc2 && i + 1 < text.size()) {
      const auto next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9f) {
        out += fmt::format("\\u{:04x}", next);
        ++i;
        continue;
      }
    }
    if (c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);
    } else if (keep_line_breaks && (c == '\n' || c == '\t')) {
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

}  // namespace

std::string terminal_line(std::string_view text) { return escaped(text, false); }

std::string terminal_block(std::string_view text) { return escaped(text, true); }

}  // namespace kiln
