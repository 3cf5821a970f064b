// The values a chat template computes with, and the Python semantics Jinja gives them: what is
// true, what is equal, how a value prints (str) and how tojson writes it (json.dumps), so the
// text kiln renders is the text transformers renders.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiln::jinja {

struct Value;
using List = std::vector<Value>;

// A dict keeps its keys in insertion order, as Python's does. A namespace() and a for loop's
// `loop` are dicts too, told apart because they behave differently: only a namespace takes
// assignments, and `loop` names an attribute it lacks instead of answering undefined.
struct Dict {
  enum class Kind { Plain, Namespace, Loop };
  Kind kind = Kind::Plain;
  std::vector<std::pair<std::string, Value>> entries;

  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value value);
};

struct Value {
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Function };
  Kind kind = Kind::Undefined;
  bool boolean = false;
  std::int64_t integer = 0;
  double real = 0;
  std::string text;  // a string's text, or a Function's name (namespace, range, ...)
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;

  static Value none();
  static Value of(bool b);
  static Value of(std::int64_t i);
  static Value of(double f);
  static Value of(std::string s);
  static Value of(List items);
  static Value of(Dict d);
  static Value function(std::string name);

  bool is_number() const { return kind == Kind::Bool || kind == Kind::Int || kind == Kind::Float; }
  double as_double() const;
};

// Python's type name, for errors ("str", "int", "list", ...).
std::string type_name(const Value& v);
bool truthy(const Value& v);
bool equal(const Value& a, const Value& b);
// a < b as Python orders numbers and strings; other pairs are a kiln::Error.
bool less(const Value& a, const Value& b);
// str(v): what {{ v }} prints ("" for undefined, None, True, Python's reprs inside lists).
std::string str(const Value& v);
// json.dumps(v, ensure_ascii=False, indent=indent) (indent < 0: on one line).
std::string to_json(const Value& v, int indent);

// Strings count, index and slice by code point, as Python's str does.
std::vector<std::string> code_points(const std::string& utf8);
// Python's str.strip()/lstrip()/rstrip(): with no chars, every Unicode whitespace.
std::string strip(const std::string& s, const std::string* chars, bool left, bool right);

}  // namespace kiln::jinja
