// The parsed form of a chat template: expressions and the statements (text, {{ }}, if, for,
// set) they sit in. The parser builds it once; the renderer walks it for each conversation.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainer/data/jinja_value.h"

namespace kiln::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,   // value
    Name,      // name
    Attr,      // operands[0].name
    Item,      // operands[0][operands[1]]
    Slice,     // operands[0][operands[1]:operands[2]:operands[3]], each bound may be null
    Call,      // a global function `name(...)`, or with `method` operands[0].name(...)
    Filter,    // operands[0] | name(operands[1:]...)
    Test,      // operands[0] is [not] name operands[1:]...
    Negate,    // -operands[0]
    Not,       // not operands[0]
    Binary,    // operands[0] name operands[1]: + - * / // % ~
    Compare,   // operands[0] ops[0] operands[1] ops[1] ... (== != < > <= >= in, not in)
    And,
    Or,
    Condition, // operands[0] if operands[1] else operands[2] (null: undefined)
    ListLiteral,
    DictLiteral,  // keys[i]: operands[i]
  };
  Kind kind = Kind::Literal;
  int line = 1;
  Value value;
  std::string name;
  bool method = false;
  bool negated = false;
  std::vector<ExprPtr> operands;
  std::vector<std::pair<std::string, ExprPtr>> keyword_args;
  std::vector<std::string> ops;
  std::vector<std::string> keys;
};

struct Node;
using Body = std::vector<Node>;

struct Node {
  enum class Kind { Text, Output, If, For, Set };
  Kind kind = Kind::Text;
  int line = 1;
  std::string text;
  ExprPtr expr;  // Output's value, For's iterable, Set's value
  // If: each branch's condition and body, then the else body.
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body otherwise;  // If's else, For's else (run when nothing was iterated)
  // For: the loop variables (one, or several to unpack), its `if` filter, its body.
  std::vector<std::string> targets;
  ExprPtr filter;
  Body body;
  // Set: `set target = ...` or `set target.attribute = ...`.
  std::string target;
  std::string attribute;
};

struct Template {
  Body body;
};

// The names the renderer knows; the parser refuses any other, so a template either renders
// as Jinja would or is refused when it is compiled.
bool known_filter(const std::string& name);
bool known_test(const std::string& name);
bool known_function(const std::string& name);
bool known_method(const std::string& name);

}  // namespace kiln::jinja
