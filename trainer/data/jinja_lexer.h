// Splits a chat template into text and tags, and a tag into tokens, with the whitespace rules
// transformers renders by: `{%-`/`-%}` (and `{{-`, `{#-`, ...) strip the whitespace beside
// them; trim_blocks drops the first newline after a block or comment tag; lstrip_blocks drops
// the spaces and tabs before a block or comment tag that starts its line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::jinja {

struct Token {
  enum class Kind { Name, String, Int, Float, Op };
  Kind kind = Kind::Op;
  std::string text;  // a name, an operator, or a string literal's value
  std::int64_t integer = 0;
  double real = 0;
  int line = 1;
};

struct Chunk {
  enum class Kind { Text, Output, Statement };  // text, {{ ... }}, {% ... %}
  Kind kind = Kind::Text;
  std::string text;
  std::vector<Token> tokens;
  int line = 1;
};

// A kiln::Error "chat template line N: ..." for an unclosed tag or a character no token starts with.
std::vector<Chunk> lex(const std::string& source);

}  // namespace kiln::jinja
