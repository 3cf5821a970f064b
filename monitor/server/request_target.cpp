#include "monitor/server/request_target.h"

#include <charconv>
#include <cmath>

#include "monitor/server/api_reply.h"

namespace kiln::monitor {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding; in the query a '+' is a space, as browsers encode forms.
std::string decode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+' && plus_is_space) {
      out += ' ';
    } else if (c == '%') {
      const int hi = i + 2 < text.size() ? hex_digit(text[i + 1]) : -1;
      const int lo = hi >= 0 ? hex_digit(text[i + 2]) : -1;
      if (lo < 0) throw ApiError(http::status::bad_request, "bad percent-escape in the request target");
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(separator, start), text.size());
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

[[noreturn]] void bad_parameter(const std::string& name, const std::string& value, const char* what) {
  throw ApiError(http::status::bad_request,
                 "query parameter " + name + "='" + value + "' is not " + what);
}

}  // namespace

RequestTarget parse_target(std::string_view target) {
  if (target.empty() || target.front() != '/')
    throw ApiError(http::status::bad_request, "the request target must be an absolute path");
  RequestTarget parsed;
  const size_t question = target.find('?');
  const std::string_view path = target.substr(0, question);
  for (const std::string_view segment : split(path.substr(1), '/'))
    if (!segment.empty()) parsed.segments.push_back(decode(segment, false));
  if (question == std::string_view::npos) return parsed;
  for (const std::string_view pair : split(target.substr(question + 1), '&')) {
    if (pair.empty()) continue;
    const size_t equals = pair.find('=');
    const std::string name = decode(pair.substr(0, equals), true);
    parsed.query[name] = equals == std::string_view::npos ? "" : decode(pair.substr(equals + 1), true);
  }
  return parsed;
}

std::optional<std::string> RequestTarget::text(const std::string& name) const {
  const auto it = query.find(name);
  if (it == query.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

std::optional<int64_t> RequestTarget::integer(const std::string& name) const {
  const auto value = text(name);
  if (!value) return std::nullopt;
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), n);
  if (ec != std::errc() || end != value->data() + value->size()) bad_parameter(name, *value, "an integer");
  return n;
}

std::optional<double> RequestTarget::number(const std::string& name) const {
  const auto value = text(name);
  if (!value) return std::nullopt;
  double x = 0;
  const auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), x);
  if (ec != std::errc() || end != value->data() + value->size() || !std::isfinite(x))
    bad_parameter(name, *value, "a finite number");
  return x;
}

std::vector<std::string> RequestTarget::list(const std::string& name) const {
  std::vector<std::string> items;
  const auto value = text(name);
  if (!value) return items;
  for (const std::string_view item : split(*value, ','))
    if (!item.empty()) items.emplace_back(item);
  return items;
}

}  // namespace kiln::monitor
