// Python's semantics for the values a chat template computes with (see jinja_value.h).
#include "trainer/data/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "base/check.h"
#include "base/utf8.h"

namespace kiln::jinja {

const Value* Dict::find(const std::string& key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value value) {
  for (auto& [k, v] : entries)
    if (k == key) {
      v = std::move(value);
      return;
    }
  entries.emplace_back(key, std::move(value));
}

Value Value::none() {
  Value v;
  v.kind = Kind::None;
  return v;
}
Value Value::of(bool b) {
  Value v;
  v.kind = Kind::Bool;
  v.boolean = b;
  return v;
}
Value Value::of(std::int64_t i) {
  Value v;
  v.kind = Kind::Int;
  v.integer = i;
  return v;
}
Value Value::of(double f) {
  Value v;
  v.kind = Kind::Float;
  v.real = f;
  return v;
}
Value Value::of(std::string s) {
  Value v;
  v.kind = Kind::String;
  v.text = std::move(s);
  return v;
}
Value Value::of(List items) {
  Value v;
  v.kind = Kind::List;
  v.list = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::of(Dict d) {
  Value v;
  v.kind = Kind::Dict;
  v.dict = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::function(std::string name) {
  Value v;
  v.kind = Kind::Function;
  v.text = std::move(name);
  return v;
}

double Value::as_double() const {
  switch (kind) {
    case Kind::Bool: return boolean ? 1 : 0;
    case Kind::Int: return static_cast<double>(integer);
    default: return real;
  }
}

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return "undefined";
    case Value::Kind::None: return "NoneType";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::String: return "str";
    case Value::Kind::List: return "list";
    case Value::Kind::Dict:
      return v.dict->kind == Dict::Kind::Namespace ? "namespace"
             : v.dict->kind == Dict::Kind::Loop    ? "loop"
                                                   : "dict";
    case Value::Kind::Function: return "function";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return false;
    case Value::Kind::Bool: return v.boolean;
    case Value::Kind::Int: return v.integer != 0;
    case Value::Kind::Float: return v.real != 0;
    case Value::Kind::String: return !v.text.empty();
    case Value::Kind::List: return !v.list->empty();
    case Value::Kind::Dict: return v.dict->kind != Dict::Kind::Plain || !v.dict->entries.empty();
    case Value::Kind::Function: return true;
  }
  return false;
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind != Value::Kind::Float && b.kind != Value::Kind::Float)
      return (a.kind == Value::Kind::Bool ? a.boolean : a.integer) ==
             (b.kind == Value::Kind::Bool ? b.boolean : b.integer);
    return a.as_double() == b.as_double();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::String: return a.text == b.text;
    case Value::Kind::List:
      if (a.list->size() != b.list->size()) return false;
      for (std::size_t i = 0; i < a.list->size(); ++i)
        if (!equal((*a.list)[i], (*b.list)[i])) return false;
      return true;
    case Value::Kind::Dict:
      if (a.dict->kind != Dict::Kind::Plain || b.dict->kind != Dict::Kind::Plain) return a.dict == b.dict;
      if (a.dict->entries.size() != b.dict->entries.size()) return false;
      for (const auto& [key, value] : a.dict->entries) {
        const Value* other = b.dict->find(key);
        if (other == nullptr || !equal(value, *other)) return false;
      }
      return true;
    case Value::Kind::Function: return a.text == b.text;
    default: return true;  // undefined == undefined, None == None
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Value::Kind::Float || b.kind == Value::Kind::Float) return a.as_double() < b.as_double();
    return (a.kind == Value::Kind::Bool ? a.boolean : a.integer) < (b.kind == Value::Kind::Bool ? b.boolean : b.integer);
  }
  // UTF-8 bytes order as code points do, which is how Python orders str.
  if (a.kind == Value::Kind::String && b.kind == Value::Kind::String) return a.text < b.text;
  fail("chat template: cannot order " + type_name(a) + " and " + type_name(b));
}

namespace {

// Python's repr(float): the shortest digits that read back the same, fixed for exponents
// from -4 to 15 and scientific outside, always with a '.0' or an exponent.
std::string python_float(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buffer[64];
  const auto end = std::to_chars(buffer, buffer + sizeof buffer, f, std::chars_format::scientific).ptr;
  const std::string sci(buffer, end);
  const std::size_t e = sci.find('e');
  const bool negative = sci[0] == '-';
  std::string digits;
  for (std::size_t i = negative ? 1 : 0; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp_text[16];
    std::snprintf(exp_text, sizeof exp_text, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp_text;
  }
  if (exponent < 0) return out + "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  const auto whole = static_cast<std::size_t>(exponent + 1);
  if (digits.size() <= whole) return out + digits + std::string(whole - digits.size(), '0') + ".0";
  return out + digits.substr(0, whole) + "." + digits.substr(whole);
}

// Python's repr(str): single quotes unless the text holds one and no double quote.
std::string python_repr(const std::string& s) {
  const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : s) {
    if (c == quote || c == '\\') out += std::string("\\") + c;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(c));
      out += hex;
    } else {
      out += c;
    }
  }
  return out + quote;
}

std::string repr(const Value& v) { return v.kind == Value::Kind::String ? python_repr(v.text) : str(v); }

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char hex[8];
          std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned char>(c));
          out += hex;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void write_json(const Value& v, int indent, int depth, std::string& out) {
  const std::string item_separator = indent < 0 ? ", " : ",";
  const auto newline = [&](int level) {
    if (indent >= 0) out += "\n" + std::string(static_cast<std::size_t>(indent * level), ' ');
  };
  switch (v.kind) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.boolean ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.integer); return;
    case Value::Kind::Float:
      out += std::isnan(v.real) ? "NaN" : std::isinf(v.real) ? (v.real > 0 ? "Infinity" : "-Infinity") : python_float(v.real);
      return;
    case Value::Kind::String: out += json_string(v.text); return;
    case Value::Kind::List:
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += "[";
      for (std::size_t i = 0; i < v.list->size(); ++i) {
        if (i > 0) out += item_separator;
        newline(depth + 1);
        write_json((*v.list)[i], indent, depth + 1, out);
      }
      newline(depth);
      out += "]";
      return;
    case Value::Kind::Dict:
      if (v.dict->kind != Dict::Kind::Plain) break;
      if (v.dict->entries.empty()) {
        out += "{}";
        return;
      }
      out += "{";
      for (std::size_t i = 0; i < v.dict->entries.size(); ++i) {
        if (i > 0) out += item_separator;
        newline(depth + 1);
        out += json_string(v.dict->entries[i].first) + ": ";
        write_json(v.dict->entries[i].second, indent, depth + 1, out);
      }
      newline(depth);
      out += "}";
      return;
    case Value::Kind::Undefined:
    case Value::Kind::Function: break;
  }
  fail("chat template: tojson cannot write a " + type_name(v));
}

// Python's str.isspace() for one code point.
bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

}  // namespace

std::string str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.boolean ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.integer);
    case Value::Kind::Float: return python_float(v.real);
    case Value::Kind::String: return v.text;
    case Value::Kind::List: {
      std::string out = "[";
      for (std::size_t i = 0; i < v.list->size(); ++i) out += (i > 0 ? ", " : "") + repr((*v.list)[i]);
      return out + "]";
    }
    case Value::Kind::Dict: {
      if (v.dict->kind != Dict::Kind::Plain) fail("chat template: cannot print a " + type_name(v));
      std::string out = "{";
      for (std::size_t i = 0; i < v.dict->entries.size(); ++i)
        out += (i > 0 ? ", " : "") + python_repr(v.dict->entries[i].first) + ": " + repr(v.dict->entries[i].second);
      return out + "}";
    }
    case Value::Kind::Function: fail("chat template: cannot print the function " + v.text);
  }
  return "";
}

std::string to_json(const Value& v, int indent) {
  std::string out;
  write_json(v, indent, 0, out);
  return out;
}

std::vector<std::string> code_points(const std::string& utf8) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < utf8.size();) {
    const auto lead = static_cast<unsigned char>(utf8[i]);
    const std::size_t length = lead < 0x80 ? 1 : lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : 4;
    out.push_back(utf8.substr(i, length));
    i += length;
  }
  return out;
}

std::string strip(const std::string& s, const std::string* chars, bool left, bool right) {
  const std::vector<std::string> points = code_points(s);
  const std::vector<std::string> strip_set = chars != nullptr ? code_points(*chars) : std::vector<std::string>{};
  const auto stripped = [&](const std::string& cp) {
    if (chars == nullptr) return is_python_space(code_point_of(cp));
    for (const auto& c : strip_set)
      if (c == cp) return true;
    return false;
  };
  std::size_t begin = 0, end = points.size();
  while (left && begin < end && stripped(points[begin])) ++begin;
  while (right && end > begin && stripped(points[end - 1])) --end;
  std::string out;
  for (std::size_t i = begin; i < end; ++i) out += points[i];
  return out;
}

}  // namespace kiln::jinja
