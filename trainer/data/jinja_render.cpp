// The chat template's renderer: walks the syntax tree with Python's semantics for values
// (jinja_value.h) and Jinja's for names, loops and scopes (see jinja_render.h).
#include "trainer/data/jinja_render.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "base/check.h"

namespace kiln::jinja {

namespace {

[[noreturn]] void error_at(int line, const std::string& what) {
  fail("chat template line " + std::to_string(line) + ": " + what);
}

bool is_int(const Value& v) { return v.kind == Value::Kind::Int || v.kind == Value::Kind::Bool; }
std::int64_t int_of(const Value& v) { return v.kind == Value::Kind::Bool ? v.boolean : v.integer; }

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Python's slice bounds (PySlice_AdjustIndices): the indices a[start:stop:step] visits.
std::vector<std::int64_t> slice_indices(std::int64_t length, const Value& start, const Value& stop, const Value& step,
                                        int line) {
  const auto given = [](const Value& v) { return v.kind != Value::Kind::Undefined && v.kind != Value::Kind::None; };
  for (const Value* v : {&start, &stop, &step})
    if (given(*v) && !is_int(*v)) error_at(line, "slice bounds must be integers, not " + type_name(*v));
  const std::int64_t by = given(step) ? int_of(step) : 1;
  if (by == 0) error_at(line, "a slice step cannot be zero");
  const auto adjust = [&](const Value& v, std::int64_t fallback) {
    if (!given(v)) return fallback;
    std::int64_t i = int_of(v);
    if (i < 0) {
      i += length;
      if (i < 0) i = by < 0 ? -1 : 0;
    } else if (i >= length) {
      i = by < 0 ? length - 1 : length;
    }
    return i;
  };
  const std::int64_t from = adjust(start, by < 0 ? length - 1 : 0);
  const std::int64_t to = adjust(stop, by < 0 ? -1 : length);
  std::vector<std::int64_t> out;
  for (std::int64_t i = from; by > 0 ? i < to : i > to; i += by) out.push_back(i);
  return out;
}

class Renderer {
 public:
  explicit Renderer(const RenderInput& input) : now_(input.now) {
    scopes_.emplace_back();
    for (const char* f : {"namespace", "range", "raise_exception", "strftime_now"}) scopes_[0][f] = Value::function(f);
    for (const auto& [name, value] : input.variables) scopes_[0][name] = value;
    scopes_.emplace_back();
  }

  void run(const Body& body, std::string& out) {
    for (const Node& node : body) {
      switch (node.kind) {
        case Node::Kind::Text: out += node.text; break;
        case Node::Kind::Output: out += str(eval(*node.expr)); break;
        case Node::Kind::If: {
          const Body* chosen = &node.otherwise;
          for (const auto& [condition, branch] : node.branches)
            if (truthy(eval(*condition))) {
              chosen = &branch;
              break;
            }
          run(*chosen, out);
          break;
        }
        case Node::Kind::For: run_for(node, out); break;
        case Node::Kind::Set: assign(node); break;
      }
    }
  }

 private:
  Value lookup(const std::string& name) const {
    for (auto scope = scopes_.rbegin(); scope != scopes_.rend(); ++scope) {
      const auto found = scope->find(name);
      if (found != scope->end()) return found->second;
    }
    return Value{};
  }

  void assign(const Node& node) {
    Value value = eval(*node.expr);
    if (node.attribute.empty()) {
      scopes_.back()[node.target] = std::move(value);
      return;
    }
    const Value target = lookup(node.target);
    if (target.kind != Value::Kind::Dict || target.dict->kind != Dict::Kind::Namespace)
      error_at(node.line, "{% set " + node.target + "." + node.attribute + " %} needs a namespace(), not a " +
                              type_name(target));
    target.dict->set(node.attribute, std::move(value));
  }

  List iterate(const Value& v, int line) {
    switch (v.kind) {
      case Value::Kind::Undefined: return {};
      case Value::Kind::List: return *v.list;
      case Value::Kind::String: {
        List out;
        for (auto& cp : code_points(v.text)) out.push_back(Value::of(cp));
        return out;
      }
      case Value::Kind::Dict:
        if (v.dict->kind == Dict::Kind::Plain) {
          List out;
          for (const auto& entry : v.dict->entries) out.push_back(Value::of(entry.first));
          return out;
        }
        break;
      default: break;
    }
    error_at(line, "cannot iterate over a " + type_name(v));
  }

  void bind(const Node& node, const Value& item) {
    auto& scope = scopes_.back();
    if (node.targets.size() == 1) {
      scope[node.targets[0]] = item;
      return;
    }
    if (item.kind != Value::Kind::List || item.list->size() != node.targets.size())
      error_at(node.line, "cannot unpack a " + type_name(item) + " into " + std::to_string(node.targets.size()) + " names");
    for (std::size_t i = 0; i < node.targets.size(); ++i) scope[node.targets[i]] = (*item.list)[i];
  }

  void run_for(const Node& node, std::string& out) {
    List items = iterate(eval(*node.expr), node.line);
    if (node.filter) {
      List kept;
      for (auto& item : items) {
        scopes_.emplace_back();
        bind(node, item);
        const bool keep = truthy(eval(*node.filter));
        scopes_.pop_back();
        if (keep) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) run(node.otherwise, out);
    const auto length = static_cast<std::int64_t>(items.size());
    for (std::int64_t i = 0; i < length; ++i) {
      scopes_.emplace_back();
      bind(node, items[static_cast<std::size_t>(i)]);
      Dict loop;
      loop.kind = Dict::Kind::Loop;
      loop.set("index0", Value::of(i));
      loop.set("index", Value::of(i + 1));
      loop.set("revindex0", Value::of(length - i - 1));
      loop.set("revindex", Value::of(length - i));
      loop.set("first", Value::of(i == 0));
      loop.set("last", Value::of(i == length - 1));
      loop.set("length", Value::of(length));
      loop.set("previtem", i > 0 ? items[static_cast<std::size_t>(i - 1)] : Value{});
      loop.set("nextitem", i + 1 < length ? items[static_cast<std::size_t>(i + 1)] : Value{});
      scopes_.back()["loop"] = Value::of(std::move(loop));
      run(node.body, out);
      scopes_.pop_back();
    }
  }

  // Jinja's getattr(object, name): a dict's entry, a namespace's attribute, or undefined.
  static Value attribute(const Value& object, const std::string& name, int line) {
    if (object.kind == Value::Kind::Undefined) error_at(line, "'" + name + "' of an undefined value");
    if (object.kind != Value::Kind::Dict) return Value{};
    const Value* found = object.dict->find(name);
    if (found == nullptr && object.dict->kind == Dict::Kind::Loop) error_at(line, "loop." + name + " is not supported");
    return found != nullptr ? *found : Value{};
  }

  static Value item(const Value& object, const Value& key, int line) {
    if (object.kind == Value::Kind::Undefined) error_at(line, "an item of an undefined value");
    if (object.kind == Value::Kind::Dict) return key.kind == Value::Kind::String ? attribute(object, key.text, line) : Value{};
    if ((object.kind == Value::Kind::List || object.kind == Value::Kind::String) && is_int(key)) {
      const std::vector<std::string> points =
          object.kind == Value::Kind::String ? code_points(object.text) : std::vector<std::string>{};
      const auto size = static_cast<std::int64_t>(object.kind == Value::Kind::List ? object.list->size() : points.size());
      std::int64_t i = int_of(key);
      if (i < 0) i += size;
      if (i < 0 || i >= size) return Value{};
      const auto at = static_cast<std::size_t>(i);
      return object.kind == Value::Kind::List ? (*object.list)[at] : Value::of(points[at]);
    }
    return Value{};
  }

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Literal: return e.value;
      case Expr::Kind::Name: return lookup(e.name);
      case Expr::Kind::Attr: return attribute(eval(*e.operands[0]), e.name, e.line);
      case Expr::Kind::Item: return item(eval(*e.operands[0]), eval(*e.operands[1]), e.line);
      case Expr::Kind::Slice: return slice(e);
      case Expr::Kind::Call: return e.method ? call_method(e) : call_function(e);
      case Expr::Kind::Filter: return filter(e);
      case Expr::Kind::Test: {
        std::vector<Value> args;
        for (std::size_t i = 1; i < e.operands.size(); ++i) args.push_back(eval(*e.operands[i]));
        return Value::of(test(e.name, eval(*e.operands[0]), args, e.line) != e.negated);
      }
      case Expr::Kind::Negate: {
        const Value v = eval(*e.operands[0]);
        if (is_int(v)) return Value::of(-int_of(v));
        if (v.kind == Value::Kind::Float) return Value::of(-v.real);
        error_at(e.line, "cannot negate a " + type_name(v));
      }
      case Expr::Kind::Not: return Value::of(!truthy(eval(*e.operands[0])));
      case Expr::Kind::Binary: return binary(e.name, eval(*e.operands[0]), eval(*e.operands[1]), e.line);
      case Expr::Kind::Compare: {
        Value left = eval(*e.operands[0]);
        for (std::size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.operands[i + 1]);
          if (!compare(e.ops[i], left, right, e.line)) return Value::of(false);
          left = std::move(right);
        }
        return Value::of(true);
      }
      case Expr::Kind::And: {
        Value left = eval(*e.operands[0]);
        return truthy(left) ? eval(*e.operands[1]) : left;
      }
      case Expr::Kind::Or: {
        Value left = eval(*e.operands[0]);
        return truthy(left) ? left : eval(*e.operands[1]);
      }
      case Expr::Kind::Condition:
        if (truthy(eval(*e.operands[1]))) return eval(*e.operands[0]);
        return e.operands[2] ? eval(*e.operands[2]) : Value{};
      case Expr::Kind::ListLiteral: {
        List items;
        for (const auto& operand : e.operands) items.push_back(eval(*operand));
        return Value::of(std::move(items));
      }
      case Expr::Kind::DictLiteral: {
        Dict d;
        for (std::size_t i = 0; i < e.keys.size(); ++i) d.set(e.keys[i], eval(*e.operands[i]));
        return Value::of(std::move(d));
      }
    }
    return Value{};
  }

  Value slice(const Expr& e) {
    const Value object = eval(*e.operands[0]);
    Value bounds[3];
    for (std::size_t i = 0; i < 3; ++i)
      if (e.operands[i + 1]) bounds[i] = eval(*e.operands[i + 1]);
    if (object.kind == Value::Kind::List) {
      List out;
      for (const auto i : slice_indices(static_cast<std::int64_t>(object.list->size()), bounds[0], bounds[1], bounds[2], e.line))
        out.push_back((*object.list)[static_cast<std::size_t>(i)]);
      return Value::of(std::move(out));
    }
    if (object.kind == Value::Kind::String) {
      const std::vector<std::string> points = code_points(object.text);
      std::string out;
      for (const auto i : slice_indices(static_cast<std::int64_t>(points.size()), bounds[0], bounds[1], bounds[2], e.line))
        out += points[static_cast<std::size_t>(i)];
      return Value::of(std::move(out));
    }
    error_at(e.line, "cannot slice a " + type_name(object));
  }

  static Value binary(const std::string& op, const Value& a, const Value& b, int line) {
    if (op == "~") return Value::of(str(a) + str(b));
    const bool numbers = a.is_number() && b.is_number();
    const bool ints = numbers && is_int(a) && is_int(b);
    if (op == "+") {
      if (ints) return Value::of(int_of(a) + int_of(b));
      if (numbers) return Value::of(a.as_double() + b.as_double());
      if (a.kind == Value::Kind::String && b.kind == Value::Kind::String) return Value::of(a.text + b.text);
      if (a.kind == Value::Kind::List && b.kind == Value::Kind::List) {
        List joined = *a.list;
        joined.insert(joined.end(), b.list->begin(), b.list->end());
        return Value::of(std::move(joined));
      }
    } else if (op == "-") {
      if (ints) return Value::of(int_of(a) - int_of(b));
      if (numbers) return Value::of(a.as_double() - b.as_double());
    } else if (op == "*") {
      if (ints) return Value::of(int_of(a) * int_of(b));
      if (numbers) return Value::of(a.as_double() * b.as_double());
      if (a.kind == Value::Kind::String && is_int(b)) {
        std::string out;
        for (std::int64_t i = 0; i < int_of(b); ++i) out += a.text;
        return Value::of(std::move(out));
      }
    } else if (numbers) {
      if (b.as_double() == 0) error_at(line, "division by zero");
      if (op == "/") return Value::of(a.as_double() / b.as_double());
      if (ints && op == "//") return Value::of(floor_div(int_of(a), int_of(b)));
      if (ints) return Value::of(int_of(a) - floor_div(int_of(a), int_of(b)) * int_of(b));
      const double q = std::floor(a.as_double() / b.as_double());
      return Value::of(op == "//" ? q : a.as_double() - q * b.as_double());
    } else if (op == "%" && a.kind == Value::Kind::String) {
      error_at(line, "string formatting with % is not supported");
    }
    error_at(line, "cannot apply " + op + " to a " + type_name(a) + " and a " + type_name(b));
  }

  static bool contains(const Value& haystack, const Value& needle, int line) {
    switch (haystack.kind) {
      case Value::Kind::Undefined: return false;
      case Value::Kind::String:
        if (needle.kind != Value::Kind::String) error_at(line, "'in <string>' needs a string, not a " + type_name(needle));
        return haystack.text.find(needle.text) != std::string::npos;
      case Value::Kind::List:
        for (const auto& v : *haystack.list)
          if (equal(v, needle)) return true;
        return false;
      case Value::Kind::Dict:
        return needle.kind == Value::Kind::String && haystack.dict->find(needle.text) != nullptr;
      default: error_at(line, "'in' cannot look inside a " + type_name(haystack));
    }
  }

  static bool compare(const std::string& op, const Value& a, const Value& b, int line) {
    if (op == "==") return equal(a, b);
    if (op == "!=") return !equal(a, b);
    if (op == "in") return contains(b, a, line);
    if (op == "not in") return !contains(b, a, line);
    if (op == "<") return less(a, b);
    if (op == ">") return less(b, a);
    if (op == "<=") return !less(b, a);
    return !less(a, b);
  }

  static bool test(const std::string& name, const Value& v, const std::vector<Value>& args, int line) {
    const auto argument = [&]() -> const Value& {
      if (args.size() != 1) error_at(line, "the test 'is " + name + "' takes one argument");
      return args[0];
    };
    if (name == "defined") return v.kind != Value::Kind::Undefined;
    if (name == "undefined") return v.kind == Value::Kind::Undefined;
    if (name == "none") return v.kind == Value::Kind::None;
    if (name == "string") return v.kind == Value::Kind::String;
    if (name == "number") return v.is_number();
    if (name == "integer") return v.kind == Value::Kind::Int;
    if (name == "float") return v.kind == Value::Kind::Float;
    if (name == "boolean") return v.kind == Value::Kind::Bool;
    if (name == "true") return v.kind == Value::Kind::Bool && v.boolean;
    if (name == "false") return v.kind == Value::Kind::Bool && !v.boolean;
    if (name == "mapping") return v.kind == Value::Kind::Dict && v.dict->kind == Dict::Kind::Plain;
    if (name == "iterable" || name == "sequence")
      return v.kind == Value::Kind::String || v.kind == Value::Kind::List ||
             (v.kind == Value::Kind::Dict && v.dict->kind == Dict::Kind::Plain);
    if (name == "equalto" || name == "eq") return equal(v, argument());
    if (name == "ne") return !equal(v, argument());
    if (name == "in") return contains(argument(), v, line);
    if (!is_int(v)) error_at(line, "the test 'is " + name + "' needs an integer, not a " + type_name(v));
    if (name == "odd") return int_of(v) % 2 != 0;
    if (name == "even") return int_of(v) % 2 == 0;
    const Value& divisor = argument();
    if (!is_int(divisor) || int_of(divisor) == 0) error_at(line, "'is divisibleby' needs a non-zero integer");
    return int_of(v) % int_of(divisor) == 0;
  }

  // The positional and keyword arguments of a call or filter, by position or name.
  struct Arguments {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keyword;
    int line;
    const std::string* called;

    const Value* get(std::size_t position, const char* name) const {
      for (const auto& [key, value] : keyword)
        if (key == name) return &value;
      return position < positional.size() ? &positional[position] : nullptr;
    }
    void allow(std::size_t most_positional, std::initializer_list<const char*> names) const {
      if (positional.size() > most_positional)
        error_at(line, *called + " takes at most " + std::to_string(most_positional) + " positional arguments");
      for (const auto& entry : keyword) {
        bool known = false;
        for (const char* n : names) known = known || entry.first == n;
        if (!known) error_at(line, *called + " does not take the argument " + entry.first + "=");
      }
    }
  };

  Arguments arguments(const Expr& e, std::size_t first, const std::string& called) {
    Arguments a{{}, {}, e.line, &called};
    for (std::size_t i = first; i < e.operands.size(); ++i) a.positional.push_back(eval(*e.operands[i]));
    for (const auto& [key, value] : e.keyword_args) a.keyword.emplace_back(key, eval(*value));
    return a;
  }

  static const std::string& string_argument(const Value* v, const std::string& called, int line) {
    if (v == nullptr || v->kind != Value::Kind::String) error_at(line, called + " needs a string argument");
    return v->text;
  }

  Value call_function(const Expr& e) {
    const Value callee = lookup(e.name);
    if (callee.kind != Value::Kind::Function) error_at(e.line, e.name + " is a " + type_name(callee) + ", not a function");
    const std::string called = e.name + "()";
    const Arguments a = arguments(e, 0, called);
    if (e.name == "raise_exception") {
      a.allow(1, {});
      throw Error(str(a.positional.empty() ? Value{} : a.positional[0]));
    }
    if (e.name == "namespace") {  // namespace(name=value, ...): any names
      if (!a.positional.empty()) error_at(e.line, "namespace() takes only name=value arguments");
      Dict ns;
      ns.kind = Dict::Kind::Namespace;
      for (const auto& [key, value] : a.keyword) ns.set(key, value);
      return Value::of(std::move(ns));
    }
    if (e.name == "strftime_now") {
      a.allow(1, {});
      char text[256];
      const std::size_t n = std::strftime(text, sizeof text, string_argument(a.get(0, ""), called, e.line).c_str(), &now_);
      return Value::of(std::string(text, n));
    }
    a.allow(3, {});  // range
    for (const auto& v : a.positional)
      if (!is_int(v)) error_at(e.line, "range() takes integers");
    if (a.positional.empty()) error_at(e.line, "range() needs an argument");
    const bool one = a.positional.size() == 1;
    const std::int64_t start = one ? 0 : int_of(a.positional[0]);
    const std::int64_t stop = one ? int_of(a.positional[0]) : int_of(a.positional[1]);
    const std::int64_t step = a.positional.size() == 3 ? int_of(a.positional[2]) : 1;
    if (step == 0) error_at(e.line, "range() step cannot be zero");
    List out;
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(Value::of(i));
    return Value::of(std::move(out));
  }

  Value call_method(const Expr& e) {
    const Value object = eval(*e.operands[0]);
    const std::string called = "." + e.name + "()";
    const Arguments a = arguments(e, 1, called);
    if (object.kind == Value::Kind::String) {
      const std::string& s = object.text;
      if (e.name == "startswith" || e.name == "endswith") {
        a.allow(1, {});
        const std::string& affix = string_argument(a.get(0, ""), called, e.line);
        const bool starts = s.compare(0, affix.size(), affix) == 0;
        const bool ends = s.size() >= affix.size() && s.compare(s.size() - affix.size(), affix.size(), affix) == 0;
        return Value::of(e.name == "startswith" ? starts : ends);
      }
      if (e.name == "strip" || e.name == "lstrip" || e.name == "rstrip") {
        a.allow(1, {});
        const Value* chars = a.get(0, "");
        const std::string* set = chars != nullptr && chars->kind != Value::Kind::None
                                     ? &string_argument(chars, called, e.line)
                                     : nullptr;
        return Value::of(strip(s, set, e.name != "rstrip", e.name != "lstrip"));
      }
      if (e.name == "split") return split(s, a, called);
      if (e.name == "replace") {
        a.allow(2, {});
        const std::string& from = string_argument(a.get(0, ""), called, e.line);
        const std::string& to = string_argument(a.get(1, ""), called, e.line);
        if (from.empty()) error_at(e.line, ".replace() of an empty string is not supported");
        std::string out;
        std::size_t at = 0;
        for (std::size_t found; (found = s.find(from, at)) != std::string::npos; at = found + from.size())
          out += s.substr(at, found - at) + to;
        return Value::of(out + s.substr(at));
      }
    } else if (object.kind == Value::Kind::Dict && object.dict->kind == Dict::Kind::Plain) {
      List out;
      if (e.name == "get") {
        a.allow(2, {});
        const Value* found = object.dict->find(string_argument(a.get(0, ""), called, e.line));
        if (found != nullptr) return *found;
        return a.positional.size() > 1 ? a.positional[1] : Value::none();
      }
      a.allow(0, {});
      for (const auto& [key, value] : object.dict->entries) {
        if (e.name == "items") out.push_back(Value::of(List{Value::of(key), value}));
        else out.push_back(e.name == "keys" ? Value::of(key) : value);
      }
      if (e.name == "items" || e.name == "keys" || e.name == "values") return Value::of(std::move(out));
    }
    error_at(e.line, "a " + type_name(object) + " has no method " + called);
  }

  static Value split(const std::string& s, const Arguments& a, const std::string& called) {
    a.allow(2, {"sep", "maxsplit"});
    const Value* sep = a.get(0, "sep");
    const Value* most = a.get(1, "maxsplit");
    std::int64_t left = most != nullptr && is_int(*most) ? int_of(*most) : -1;
    List out;
    if (sep == nullptr || sep->kind == Value::Kind::None) {
      // Runs of whitespace split, and none is kept at either end.
      std::string rest = strip(s, nullptr, true, false);
      while (!rest.empty()) {
        if (left == 0) {
          out.push_back(Value::of(rest));
          break;
        }
        const std::string word_and_rest = rest;
        std::size_t end = 0;
        const std::vector<std::string> points = code_points(word_and_rest);
        std::string word;
        for (; end < points.size() && strip(points[end], nullptr, true, true) == points[end]; ++end) word += points[end];
        out.push_back(Value::of(word));
        rest = strip(word_and_rest.substr(word.size()), nullptr, true, false);
        --left;
      }
      return Value::of(std::move(out));
    }
    const std::string& separator = string_argument(sep, called, a.line);
    if (separator.empty()) error_at(a.line, "empty separator");
    std::size_t at = 0;
    for (std::size_t found; left != 0 && (found = s.find(separator, at)) != std::string::npos; --left) {
      out.push_back(Value::of(s.substr(at, found - at)));
      at = found + separator.size();
    }
    out.push_back(Value::of(s.substr(at)));
    return Value::of(std::move(out));
  }

  Value filter(const Expr& e) {
    const Value v = eval(*e.operands[0]);
    const std::string called = "the filter " + e.name;
    const Arguments a = arguments(e, 1, called);
    const std::string& f = e.name;
    if (f == "trim") {
      a.allow(1, {"chars"});
      const Value* chars = a.get(0, "chars");
      return Value::of(strip(str(v), chars != nullptr ? &string_argument(chars, called, e.line) : nullptr, true, true));
    }
    if (f == "length" || f == "count") {
      a.allow(0, {});
      switch (v.kind) {
        case Value::Kind::Undefined: return Value::of(std::int64_t{0});
        case Value::Kind::String: return Value::of(static_cast<std::int64_t>(code_points(v.text).size()));
        case Value::Kind::List: return Value::of(static_cast<std::int64_t>(v.list->size()));
        case Value::Kind::Dict:
          if (v.dict->kind == Dict::Kind::Plain) return Value::of(static_cast<std::int64_t>(v.dict->entries.size()));
          break;
        default: break;
      }
      error_at(e.line, "a " + type_name(v) + " has no length");
    }
    if (f == "tojson") {
      a.allow(1, {"indent"});
      const Value* indent = a.get(0, "indent");
      if (indent != nullptr && indent->kind != Value::Kind::None && !is_int(*indent))
        error_at(e.line, "tojson's indent must be an integer");
      return Value::of(to_json(v, indent != nullptr && is_int(*indent) ? static_cast<int>(int_of(*indent)) : -1));
    }
    if (f == "string") {
      a.allow(0, {});
      return Value::of(str(v));
    }
    if (f == "list") {
      a.allow(0, {});
      return Value::of(iterate(v, e.line));
    }
    if (f == "first" || f == "last") {
      a.allow(0, {});
      const List items = iterate(v, e.line);
      if (items.empty()) return Value{};
      return f == "first" ? items.front() : items.back();
    }
    if (f == "join") {
      a.allow(2, {"d", "attribute"});
      const Value* separator = a.get(0, "d");
      const Value* attr = a.get(1, "attribute");
      std::string out;
      bool first = true;
      for (const auto& item : iterate(v, e.line)) {
        if (!first) out += separator != nullptr ? str(*separator) : "";
        first = false;
        out += str(attr != nullptr ? attribute(item, string_argument(attr, called, e.line), e.line) : item);
      }
      return Value::of(out);
    }
    if (f == "default" || f == "d") {
      a.allow(2, {"default_value", "boolean"});
      const Value* fallback = a.get(0, "default_value");
      const Value* boolean = a.get(1, "boolean");
      const bool use = v.kind == Value::Kind::Undefined || (boolean != nullptr && truthy(*boolean) && !truthy(v));
      return use ? (fallback != nullptr ? *fallback : Value::of(std::string())) : v;
    }
    if (f == "map") {
      a.allow(0, {"attribute", "default"});
      const Value* attr = a.get(99, "attribute");
      const Value* fallback = a.get(99, "default");
      const std::string& name = string_argument(attr, "map (with attribute=)", e.line);
      List out;
      for (const auto& item : iterate(v, e.line)) {
        Value got = attribute(item, name, e.line);
        out.push_back(got.kind == Value::Kind::Undefined && fallback != nullptr ? *fallback : got);
      }
      return Value::of(std::move(out));
    }
    // selectattr / rejectattr: the items whose attribute passes the test (or is true).
    if (a.positional.empty() || !a.keyword.empty()) error_at(e.line, called + " takes an attribute name and a test");
    const std::string& name = string_argument(&a.positional[0], called, e.line);
    std::string test_name;
    if (a.positional.size() > 1) {
      test_name = string_argument(&a.positional[1], called, e.line);
      if (test_name == "==") test_name = "eq";
      if (!known_test(test_name)) error_at(e.line, "the test '" + test_name + "' is not supported");
    }
    const std::vector<Value> test_args(a.positional.begin() + std::min<std::ptrdiff_t>(2, static_cast<std::ptrdiff_t>(a.positional.size())),
                                       a.positional.end());
    List out;
    for (const auto& item : iterate(v, e.line)) {
      const Value got = attribute(item, name, e.line);
      const bool passes = test_name.empty() ? truthy(got) : test(test_name, got, test_args, e.line);
      if (passes == (f == "selectattr")) out.push_back(item);
    }
    return Value::of(std::move(out));
  }

  std::tm now_;
  std::vector<std::unordered_map<std::string, Value>> scopes_;
};

}  // namespace

std::string render(const Template& compiled, const RenderInput& input) {
  Renderer renderer(input);
  std::string out;
  renderer.run(compiled.body, out);
  return out;
}

}  // namespace kiln::jinja
