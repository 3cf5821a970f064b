// The chat template's lexer (see jinja_lexer.h).
#include "trainer/data/jinja_lexer.h"

#include <algorithm>
#include <cctype>

#include "base/check.h"
#include "trainer/data/jinja_value.h"

namespace kiln::jinja {

namespace {

[[noreturn]] void fail_at(int line, const std::string& what) {
  fail("chat template line " + std::to_string(line) + ": " + what);
}

int newlines(const std::string& s, std::size_t begin, std::size_t end) {
  return static_cast<int>(std::count(s.begin() + static_cast<std::ptrdiff_t>(begin),
                                     s.begin() + static_cast<std::ptrdiff_t>(end), '\n'));
}

bool starts_with_at(const std::string& s, std::size_t at, const char* prefix) {
  return s.compare(at, std::char_traits<char>::length(prefix), prefix) == 0;
}

// A string literal's value, with Python's escapes. `at` is on the opening quote; on return it
// is past the closing one.
std::string string_literal(const std::string& s, std::size_t& at, int line) {
  const char quote = s[at++];
  std::string value;
  while (at < s.size() && s[at] != quote) {
    if (s[at] != '\\') {
      value += s[at++];
      continue;
    }
    if (++at >= s.size()) break;
    const char c = s[at++];
    switch (c) {
      case 'n': value += '\n'; break;
      case 't': value += '\t'; break;
      case 'r': value += '\r'; break;
      case '\\': value += '\\'; break;
      case '\'': value += '\''; break;
      case '"': value += '"'; break;
      case '\n': break;  // a backslash at the end of a line continues it
      default: fail_at(line, std::string("the string escape \\") + c + " is not supported");
    }
  }
  if (at >= s.size()) fail_at(line, "a string is not closed");
  ++at;
  return value;
}

// The tokens of a {{ ... }} or {% ... %} from `at` (past the opening delimiter and its
// marker) to the closing delimiter; on return `at` is on the closing delimiter's first
// character, `marker` the '-' or '+' before it (or 0).
std::vector<Token> tag_tokens(const std::string& s, std::size_t& at, int& line, bool output, char& marker) {
  std::vector<Token> tokens;
  int braces = 0;  // inside a dict literal, "}}" closes the dict, not the tag
  const char* close = output ? "}}" : "%}";
  for (;;) {
    while (at < s.size() && std::isspace(static_cast<unsigned char>(s[at]))) line += s[at++] == '\n';
    if (at >= s.size()) fail_at(line, output ? "a {{ is not closed" : "a {% is not closed");
    if (braces == 0 || !output) {
      for (const char m : {'-', '+'})
        if (s[at] == m && starts_with_at(s, at + 1, close)) {
          marker = m;
          ++at;
          return tokens;
        }
      if (starts_with_at(s, at, close)) {
        marker = 0;
        return tokens;
      }
    }
    Token token;
    token.line = line;
    const char c = s[at];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const std::size_t begin = at;
      while (at < s.size() && (std::isalnum(static_cast<unsigned char>(s[at])) || s[at] == '_')) ++at;
      token.kind = Token::Kind::Name;
      token.text = s.substr(begin, at - begin);
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      const std::size_t begin = at;
      while (at < s.size() && std::isdigit(static_cast<unsigned char>(s[at]))) ++at;
      const bool real = at + 1 < s.size() && s[at] == '.' && std::isdigit(static_cast<unsigned char>(s[at + 1]));
      if (real) {
        ++at;
        while (at < s.size() && std::isdigit(static_cast<unsigned char>(s[at]))) ++at;
      }
      token.text = s.substr(begin, at - begin);
      token.kind = real ? Token::Kind::Float : Token::Kind::Int;
      if (real) token.real = std::stod(token.text);
      else token.integer = std::stoll(token.text);
    } else if (c == '\'' || c == '"') {
      token.kind = Token::Kind::String;
      token.text = string_literal(s, at, line);
    } else {
      token.kind = Token::Kind::Op;
      for (const char* op : {"//", "**", "==", "!=", "<=", ">="})
        if (starts_with_at(s, at, op)) token.text = op;
      if (token.text.empty()) {
        if (std::string("+-*/%~()[]{}.,:|<>=").find(c) == std::string::npos)
          fail_at(line, std::string("the character '") + c + "' is not supported in a tag");
        token.text = std::string(1, c);
      }
      at += token.text.size();
      braces += token.text == "{" ? 1 : token.text == "}" ? -1 : 0;
    }
    tokens.push_back(std::move(token));
  }
}

}  // namespace

std::vector<Chunk> lex(const std::string& text) {
  // As Jinja reads a template: every line break a \n, and the last one dropped
  // (keep_trailing_newline is off in transformers).
  std::string source;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\r') source += text[i];
    else if (i + 1 >= text.size() || text[i + 1] != '\n') source += '\n';
  }
  if (!source.empty() && source.back() == '\n') source.pop_back();
  std::vector<Chunk> chunks;
  std::size_t at = 0;
  int line = 1;
  bool line_starting = true;  // the text ahead starts a line (lstrip_blocks looks at it)
  while (at < source.size()) {
    const std::size_t open = std::min({source.find("{{", at), source.find("{%", at), source.find("{#", at)});
    std::string text = source.substr(at, open == std::string::npos ? std::string::npos : open - at);
    const int text_line = line;
    line += newlines(source, at, open == std::string::npos ? source.size() : open);
    if (open == std::string::npos) {
      if (!text.empty()) chunks.push_back({Chunk::Kind::Text, text, {}, text_line});
      break;
    }
    const char kind = source[open + 1];
    const bool block = kind != '{';
    const char open_marker = source.size() > open + 2 ? source[open + 2] : 0;
    if (open_marker == '-') {
      text = strip(text, nullptr, false, true);
    } else if (block && open_marker != '+') {
      const std::size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
      if ((line_start > 0 || line_starting) && text.find_first_not_of(" \t", line_start) == std::string::npos)
        text.resize(line_start);
    }
    if (!text.empty()) chunks.push_back({Chunk::Kind::Text, text, {}, text_line});

    std::size_t inside = open + 2 + (open_marker == '-' || open_marker == '+' ? 1 : 0);
    char close_marker = 0;
    if (kind == '#') {
      const std::size_t close = source.find("#}", inside);
      if (close == std::string::npos) fail_at(line, "a {# is not closed");
      if (close > inside && (source[close - 1] == '-' || source[close - 1] == '+')) close_marker = source[close - 1];
      line += newlines(source, open, close);
      at = close + 2;
    } else {
      Chunk tag{kind == '{' ? Chunk::Kind::Output : Chunk::Kind::Statement, "", {}, line};
      tag.tokens = tag_tokens(source, inside, line, kind == '{', close_marker);
      chunks.push_back(std::move(tag));
      at = inside + 2;
    }
    line_starting = false;
    if (close_marker == '-') {
      const std::size_t end = source.find_first_not_of(" \t\n\r\v\f", at);
      const std::size_t stop = end == std::string::npos ? source.size() : end;
      line += newlines(source, at, stop);
      line_starting = stop > at && source[stop - 1] == '\n';
      at = stop;
    } else if (block && close_marker != '+' && at < source.size() && source[at] == '\n') {
      ++at;
      ++line;
      line_starting = true;
    }
  }
  return chunks;
}

}  // namespace kiln::jinja
