// The chat template's parser: Jinja's grammar and precedence (jinja2/parser.py) for the
// subset chat templates use (see jinja_parser.h).
#include "trainer/data/jinja_parser.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "base/check.h"
#include "trainer/data/jinja_lexer.h"

namespace kiln::jinja {

namespace {

constexpr std::array<std::string_view, 14> kFilters = {"trim",   "length", "count",      "tojson",     "string",
                                                       "list",   "first",  "last",       "join",       "default",
                                                       "d",      "map",    "selectattr", "rejectattr"};
constexpr std::array<std::string_view, 20> kTests = {
    "defined", "undefined", "none",     "string",   "number", "integer", "float",      "boolean", "true", "false",
    "mapping", "iterable",  "sequence", "equalto",  "eq",     "ne",      "divisibleby", "odd",    "even", "in"};
constexpr std::array<std::string_view, 4> kFunctions = {"namespace", "range", "raise_exception", "strftime_now"};
constexpr std::array<std::string_view, 11> kMethods = {"startswith", "endswith", "split", "strip", "lstrip", "rstrip",
                                                       "replace",    "items",    "keys",  "values", "get"};

template <std::size_t N>
bool listed(const std::array<std::string_view, N>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

[[noreturn]] void refuse(int line, const std::string& what) {
  fail("chat template line " + std::to_string(line) + ": " + what);
}

ExprPtr make(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

// One tag's tokens, read front to back.
class ExprParser {
 public:
  ExprParser(const std::vector<Token>& tokens, int line) : tokens_(tokens), line_(line) {}

  bool done() const { return at_ >= tokens_.size(); }
  int line() const { return done() ? (tokens_.empty() ? line_ : tokens_.back().line) : tokens_[at_].line; }
  bool is_op(const char* op, std::size_t ahead = 0) const {
    return at_ + ahead < tokens_.size() && tokens_[at_ + ahead].kind == Token::Kind::Op && tokens_[at_ + ahead].text == op;
  }
  bool is_name(const char* name, std::size_t ahead = 0) const {
    return at_ + ahead < tokens_.size() && tokens_[at_ + ahead].kind == Token::Kind::Name &&
           tokens_[at_ + ahead].text == name;
  }
  void expect_op(const char* op) {
    if (!is_op(op)) refuse(line(), std::string("expected '") + op + "' " + where());
    ++at_;
  }
  std::string name() {
    if (done() || tokens_[at_].kind != Token::Kind::Name) refuse(line(), "expected a name " + where());
    return tokens_[at_++].text;
  }
  void expect_end() {
    if (!done()) refuse(line(), "unexpected " + where());
  }
  std::string where() const { return done() ? "at the end of the tag" : "at '" + tokens_[at_].text + "'"; }

  ExprPtr expression() {
    ExprPtr value = or_expr();
    if (!is_name("if")) return value;
    ++at_;
    auto e = make(Expr::Kind::Condition, value->line);
    e->operands.push_back(std::move(value));
    e->operands.push_back(or_expr());
    if (is_name("else")) {
      ++at_;
      e->operands.push_back(expression());
    } else {
      e->operands.push_back(nullptr);
    }
    return e;
  }

  ExprPtr or_expr() { return logical("or", Expr::Kind::Or, [this] { return and_expr(); }); }

 private:
  template <typename Next>
  ExprPtr logical(const char* word, Expr::Kind kind, Next next) {
    ExprPtr left = next();
    while (is_name(word)) {
      ++at_;
      auto e = make(kind, left->line);
      e->operands.push_back(std::move(left));
      e->operands.push_back(next());
      left = std::move(e);
    }
    return left;
  }
  ExprPtr and_expr() { return logical("and", Expr::Kind::And, [this] { return not_expr(); }); }
  ExprPtr not_expr() {
    if (!is_name("not")) return compare();
    const int at_line = line();
    ++at_;
    auto e = make(Expr::Kind::Not, at_line);
    e->operands.push_back(not_expr());
    return e;
  }
  ExprPtr compare() {
    ExprPtr first = sum();
    ExprPtr chain;
    for (;;) {
      std::string op;
      for (const char* o : {"==", "!=", "<", ">", "<=", ">="})
        if (is_op(o)) op = o;
      if (op.empty() && is_name("in")) op = "in";
      if (op.empty() && is_name("not") && is_name("in", 1)) op = "not in";
      if (op.empty()) break;
      at_ += op == "not in" ? 2 : 1;
      if (!chain) {
        chain = make(Expr::Kind::Compare, first->line);
        chain->operands.push_back(std::move(first));
      }
      chain->ops.push_back(op);
      chain->operands.push_back(sum());
    }
    return chain ? std::move(chain) : std::move(first);
  }
  template <typename Next>
  ExprPtr binary(std::initializer_list<const char*> ops, Next next) {
    ExprPtr left = next();
    for (;;) {
      const char* found = nullptr;
      for (const char* op : ops)
        if (is_op(op)) found = op;
      if (found == nullptr) return left;
      ++at_;
      auto e = make(Expr::Kind::Binary, left->line);
      e->name = found;
      e->operands.push_back(std::move(left));
      e->operands.push_back(next());
      left = std::move(e);
    }
  }
  ExprPtr sum() { return binary({"+", "-"}, [this] { return concat(); }); }
  ExprPtr concat() { return binary({"~"}, [this] { return product(); }); }
  ExprPtr product() {
    ExprPtr e = binary({"*", "/", "//", "%"}, [this] { return unary(true); });
    if (is_op("**")) refuse(line(), "the operator ** is not supported");
    return e;
  }
  ExprPtr unary(bool with_filters) {
    ExprPtr e;
    if (is_op("-")) {
      const int at_line = line();
      ++at_;
      e = make(Expr::Kind::Negate, at_line);
      e->operands.push_back(unary(false));
    } else {
      e = postfix(primary());
    }
    return with_filters ? filters(std::move(e)) : std::move(e);
  }

  ExprPtr primary() {
    if (done()) refuse(line(), "expected a value at the end of the tag");
    const Token& token = tokens_[at_];
    auto e = make(Expr::Kind::Literal, token.line);
    switch (token.kind) {
      case Token::Kind::String:
        e->value = Value::of(std::string());
        // Adjacent string literals join, as in Python.
        while (!done() && tokens_[at_].kind == Token::Kind::String) e->value.text += tokens_[at_++].text;
        return e;
      case Token::Kind::Int: ++at_; e->value = Value::of(token.integer); return e;
      case Token::Kind::Float: ++at_; e->value = Value::of(token.real); return e;
      case Token::Kind::Name:
        ++at_;
        if (token.text == "true" || token.text == "True") e->value = Value::of(true);
        else if (token.text == "false" || token.text == "False") e->value = Value::of(false);
        else if (token.text == "none" || token.text == "None") e->value = Value::none();
        else {
          e->kind = Expr::Kind::Name;
          e->name = token.text;
        }
        return e;
      case Token::Kind::Op: break;
    }
    if (is_op("(")) {
      ++at_;
      ExprPtr inner = expression();
      if (is_op(",")) refuse(line(), "tuples are not supported");
      expect_op(")");
      return inner;
    }
    if (is_op("[")) {
      ++at_;
      e->kind = Expr::Kind::ListLiteral;
      while (!is_op("]")) {
        e->operands.push_back(expression());
        if (!is_op(",")) break;
        ++at_;
      }
      expect_op("]");
      return e;
    }
    if (is_op("{")) {
      ++at_;
      e->kind = Expr::Kind::DictLiteral;
      while (!is_op("}")) {
        if (done() || tokens_[at_].kind != Token::Kind::String) refuse(line(), "a dict literal's keys must be strings");
        e->keys.push_back(tokens_[at_++].text);
        expect_op(":");
        e->operands.push_back(expression());
        if (!is_op(",")) break;
        ++at_;
      }
      expect_op("}");
      return e;
    }
    refuse(line(), "unexpected " + where());
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (is_op(".")) {
        ++at_;
        auto attr = make(Expr::Kind::Attr, e->line);
        attr->name = name();
        attr->operands.push_back(std::move(e));
        e = std::move(attr);
      } else if (is_op("[")) {
        ++at_;
        e = subscript(std::move(e));
      } else if (is_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr subscript(ExprPtr object) {
    const int at_line = object->line;
    std::array<ExprPtr, 3> bounds;
    bool slice = false;
    for (std::size_t part = 0; part < 3; ++part) {
      if (!is_op(":") && !is_op("]")) bounds[part] = expression();
      if (!is_op(":") || part == 2) break;
      ++at_;
      slice = true;
    }
    expect_op("]");
    if (!slice) {
      if (!bounds[0]) refuse(at_line, "an empty subscript []");
      auto item = make(Expr::Kind::Item, at_line);
      item->operands.push_back(std::move(object));
      item->operands.push_back(std::move(bounds[0]));
      return item;
    }
    auto s = make(Expr::Kind::Slice, at_line);
    s->operands.push_back(std::move(object));
    for (auto& bound : bounds) s->operands.push_back(std::move(bound));
    return s;
  }

  // The arguments of a call, a filter or a test, from '(' to ')'.
  void arguments(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (!done() && tokens_[at_].kind == Token::Kind::Name && is_op("=", 1)) {
        std::string key = tokens_[at_].text;
        at_ += 2;
        e.keyword_args.emplace_back(std::move(key), expression());
      } else {
        if (!e.keyword_args.empty()) refuse(line(), "a positional argument after a keyword argument");
        e.operands.push_back(expression());
      }
      if (!is_op(",")) break;
      ++at_;
    }
    expect_op(")");
  }

  ExprPtr call(ExprPtr callee) {
    auto c = make(Expr::Kind::Call, callee->line);
    if (callee->kind == Expr::Kind::Name) {
      if (!known_function(callee->name)) refuse(c->line, "the function " + callee->name + "() is not supported");
      c->name = callee->name;
    } else if (callee->kind == Expr::Kind::Attr) {
      if (!known_method(callee->name)) refuse(c->line, "the method ." + callee->name + "() is not supported");
      c->name = callee->name;
      c->method = true;
      c->operands.push_back(std::move(callee->operands[0]));
    } else {
      refuse(c->line, "only named functions and methods can be called");
    }
    arguments(*c);
    return c;
  }

  ExprPtr filters(ExprPtr e) {
    for (;;) {
      if (is_op("|")) {
        ++at_;
        auto f = make(Expr::Kind::Filter, line());
        f->name = name();
        if (!known_filter(f->name)) refuse(f->line, "the filter '" + f->name + "' is not supported");
        f->operands.push_back(std::move(e));
        if (is_op("(")) arguments(*f);
        e = std::move(f);
      } else if (is_name("is")) {
        ++at_;
        auto t = make(Expr::Kind::Test, line());
        if (is_name("not")) {
          ++at_;
          t->negated = true;
        }
        t->name = name();
        if (!known_test(t->name)) refuse(t->line, "the test 'is " + t->name + "' is not supported");
        t->operands.push_back(std::move(e));
        if (is_op("(")) {
          arguments(*t);
        } else if (!done() && !is_name("else") && !is_name("or") && !is_name("and") && !is_name("if") &&
                   (tokens_[at_].kind != Token::Kind::Op || is_op("[") || is_op("{"))) {
          t->operands.push_back(postfix(primary()));
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& tokens_;
  int line_;
  std::size_t at_ = 0;
};

// The statements of a template, chunk by chunk, each block up to its end tag.
class BodyParser {
 public:
  explicit BodyParser(std::vector<Chunk> chunks) : chunks_(std::move(chunks)) {}

  // The nodes up to one of the `enders` statements, whose keyword goes to `ender` (the tag is
  // left for the caller); at the top level (no enders) up to the end of the template.
  Body body(std::initializer_list<const char*> enders, std::string& ender, int opened_at, const char* opener) {
    Body nodes;
    while (at_ < chunks_.size()) {
      const Chunk& chunk = chunks_[at_];
      if (chunk.kind == Chunk::Kind::Text) {
        Node n;
        n.line = chunk.line;
        n.text = chunk.text;
        nodes.push_back(std::move(n));
        ++at_;
        continue;
      }
      ExprParser p(chunk.tokens, chunk.line);
      if (chunk.kind == Chunk::Kind::Output) {
        Node n;
        n.kind = Node::Kind::Output;
        n.line = chunk.line;
        n.expr = p.expression();
        p.expect_end();
        nodes.push_back(std::move(n));
        ++at_;
        continue;
      }
      if (p.done()) refuse(chunk.line, "an empty {% %} tag");
      const std::string keyword = chunk.tokens[0].text;
      for (const char* e : enders)
        if (keyword == e) {
          ender = keyword;
          return nodes;
        }
      ++at_;
      if (keyword == "if") nodes.push_back(if_block(p, chunk.line));
      else if (keyword == "for") nodes.push_back(for_block(p, chunk.line));
      else if (keyword == "set") nodes.push_back(set_statement(p, chunk.line));
      else if (keyword == "elif" || keyword == "else" || keyword == "endif" || keyword == "endfor")
        refuse(chunk.line, "{% " + keyword + " %} without its opening tag");
      else refuse(chunk.line, "the {% " + keyword + " %} tag is not supported");
    }
    if (opener != nullptr) refuse(opened_at, std::string("{% ") + opener + " %} is not closed");
    return nodes;
  }

 private:
  // The tag at the cursor: a parser past its keyword.
  ExprParser tag() {
    const Chunk& chunk = chunks_[at_++];
    ExprParser p(chunk.tokens, chunk.line);
    p.name();
    return p;
  }

  Node if_block(ExprParser& p, int line) {
    Node n;
    n.kind = Node::Kind::If;
    n.line = line;
    p.name();
    ExprPtr condition = p.expression();
    p.expect_end();
    for (;;) {
      std::string ender;
      Body branch = body({"elif", "else", "endif"}, ender, line, "if");
      n.branches.emplace_back(std::move(condition), std::move(branch));
      ExprParser end = tag();
      if (ender == "elif") {
        condition = end.expression();
        end.expect_end();
        continue;
      }
      end.expect_end();
      if (ender == "else") {
        n.otherwise = body({"endif"}, ender, line, "if");
        tag().expect_end();
      }
      return n;
    }
  }

  Node for_block(ExprParser& p, int line) {
    Node n;
    n.kind = Node::Kind::For;
    n.line = line;
    p.name();
    n.targets.push_back(p.name());
    while (p.is_op(",")) {
      p.expect_op(",");
      n.targets.push_back(p.name());
    }
    if (!p.is_name("in")) refuse(line, "expected 'in' in the {% for %} tag " + p.where());
    p.name();
    n.expr = p.or_expr();  // not a conditional expression: an `if` here filters the loop
    if (p.is_name("if")) {
      p.name();
      n.filter = p.or_expr();
    }
    if (p.is_name("recursive")) refuse(line, "recursive for loops are not supported");
    p.expect_end();
    std::string ender;
    n.body = body({"else", "endfor"}, ender, line, "for");
    tag().expect_end();
    if (ender == "else") {
      n.otherwise = body({"endfor"}, ender, line, "for");
      tag().expect_end();
    }
    return n;
  }

  Node set_statement(ExprParser& p, int line) {
    Node n;
    n.kind = Node::Kind::Set;
    n.line = line;
    p.name();
    n.target = p.name();
    if (p.is_op(".")) {
      p.expect_op(".");
      n.attribute = p.name();
    }
    if (p.is_op(",")) refuse(line, "{% set %} of several names is not supported");
    if (!p.is_op("=")) refuse(line, "{% set %} blocks (without '=') are not supported");
    p.expect_op("=");
    n.expr = p.expression();
    p.expect_end();
    return n;
  }

  std::vector<Chunk> chunks_;
  std::size_t at_ = 0;
};

}  // namespace

bool known_filter(const std::string& name) { return listed(kFilters, name); }
bool known_test(const std::string& name) { return listed(kTests, name); }
bool known_function(const std::string& name) { return listed(kFunctions, name); }
bool known_method(const std::string& name) { return listed(kMethods, name); }

Template parse(const std::string& source) {
  BodyParser parser(lex(source));
  std::string ender;
  return Template{parser.body({}, ender, 1, nullptr)};
}

}  // namespace kiln::jinja
