// The chat template renderer, construct by construct: whitespace control, expressions,
// loops, namespaces, raise_exception, and the one-line refusal of what it does not support.
#include "trainer/data/chat_template.h"

#include <gtest/gtest.h>

#include "tests/error_of.h"

namespace kiln {
namespace {

using test::error_of;

std::string chat_render(const std::string& text, const std::vector<ChatMessage>& messages = {},
                        const ChatTemplateOptions& options = {}) {
  return render_chat_template(text, messages, options);
}

TEST(ChatTemplate, TextAndExpressions) {
  EXPECT_EQ(chat_render("a{{ 1 + 2 }}b{{ 'x' ~ 3 }}{{ 7 // 2 }}{{ 7 % 3 }}{{ -7 // 2 }}{{ 1 / 2 }}"), "a3bx331-40.5");
  EXPECT_EQ(chat_render("{{ none }}{{ true }}{{ undefined_name }}{{ [1, 'a'] }}{{ 2.0 }}"), "NoneTrue[1, 'a']2.0");
  EXPECT_EQ(chat_render("{{ 'a' if 1 > 2 else 'b' }}{{ 1 < 2 < 3 }}{{ 'b' in 'abc' }}{{ 3 not in [1, 2] }}"),
            "bTrueTrueTrue");
  EXPECT_EQ(chat_render("{{ 0 or 'y' }}{{ 1 and 'z' }}{{ not 0 }}{{ {'k': 1}['k'] }}"), "yzTrue1");
}

TEST(ChatTemplate, WhitespaceControlAsTransformersRendersIt) {
  // trim_blocks drops the newline after a tag; lstrip_blocks the indent before one.
  EXPECT_EQ(chat_render("{% if true %}\n  x\n  {% endif %}\ny"), "  x\ny");
  EXPECT_EQ(chat_render("a  \n  {%- if true -%}  \n b {%- endif %}"), "ab");
  EXPECT_EQ(chat_render("a {{- ' b ' -}} c"), "a b c");
  EXPECT_EQ(chat_render("a\n{# note #}\nb"), "a\nb");
  // The template's last newline is dropped, as keep_trailing_newline=False does.
  EXPECT_EQ(chat_render("  {%+ if true %}x{% endif +%}\n"), "  x");
  EXPECT_EQ(chat_render("a\r\nb\n\n"), "a\nb\n");
}

TEST(ChatTemplate, MessagesAttributesItemsAndSlices) {
  const std::vector<ChatMessage> conversation = {{"system", "S"}, {"user", "U"}, {"assistant", "A"}};
  EXPECT_EQ(chat_render("{{ messages[0]['role'] }} {{ messages[-1].content }} {{ messages|length }}", conversation),
            "system A 3");
  EXPECT_EQ(chat_render("{% for m in messages[1:] %}{{ m.role }},{% endfor %}", conversation), "user,assistant,");
  EXPECT_EQ(chat_render("{% for m in messages[::-1] %}{{ m.content }}{% endfor %}", conversation), "AUS");
  EXPECT_EQ(chat_render("{{ 'héllo'[1] }}{{ 'héllo'[:-1] }}{{ 'héllo'|length }}"), "éhéll5");
  EXPECT_EQ(chat_render("{{ messages[0].missing is defined }}{{ messages[9] is defined }}", conversation),
            "FalseFalse");
}

TEST(ChatTemplate, LoopVariablesAndFilteredLoops) {
  EXPECT_EQ(chat_render("{% for x in [5, 6, 7] %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}"
                        "{{ loop.length }}|{% endfor %}"),
            "01TrueFalse3|12FalseFalse3|23FalseTrue3|");
  EXPECT_EQ(chat_render("{% for x in range(6) if x is odd %}{{ x }}{{ loop.length }} {% endfor %}"), "13 33 53 ");
  EXPECT_EQ(chat_render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(chat_render("{% for k, v in {'a': 1, 'b': 2}.items() if k != 'b' %}{{ k }}={{ v }}{% endfor %}"), "a=1");
  EXPECT_EQ(error_of([] { chat_render("{% for x in [1] %}{{ loop.cycle }}{% endfor %}"); }),
            "chat template line 1: loop.cycle is not supported");
}

TEST(ChatTemplate, SetScopesAndNamespace) {
  // A set inside a loop stays in the loop; a namespace carries values out of it.
  EXPECT_EQ(chat_render("{% set n = 0 %}{% for x in [1, 2] %}{% set n = n + x %}{% endfor %}{{ n }}"), "0");
  EXPECT_EQ(chat_render("{% set ns = namespace(n=0) %}{% for x in [1, 2] %}{% set ns.n = ns.n + x %}{% endfor %}"
                        "{{ ns.n }}"),
            "3");
  EXPECT_EQ(chat_render("{% if true %}{% set y = 'set in if' %}{% endif %}{{ y }}"), "set in if");
  EXPECT_EQ(error_of([] { chat_render("{% set s = 'x' %}{% set s.a = 1 %}"); }),
            "chat template line 1: {% set s.a %} needs a namespace(), not a str");
}

TEST(ChatTemplate, FiltersTestsAndMethods) {
  EXPECT_EQ(chat_render("[{{ ' \u3000hi\u00a0\n'|trim }}]{{ 'a\"b\\n'|tojson }}{{ {'k': [1, none]}|tojson }}"),
            "[hi]\"a\\\"b\\n\"{\"k\": [1, null]}");
  EXPECT_EQ(chat_render("{{ {'k': [1]}|tojson(indent=2) }}"), "{\n  \"k\": [\n    1\n  ]\n}");
  EXPECT_EQ(chat_render("{{ [3, 4]|first }}{{ [3, 4]|last }}{{ [1, 2]|join('-') }}{{ x|default('d') }}{{ 5|string }}"),
            "341-2d5");
  const std::vector<ChatMessage> conversation = {{"user", "a"}, {"assistant", "b"}, {"user", "c"}};
  EXPECT_EQ(chat_render("{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|join }}"
                        "{{ messages|rejectattr('role', 'equalto', 'user')|list|length }}",
                        conversation),
            "ac1");
  EXPECT_EQ(chat_render("{{ 'x' is string }}{{ 1 is number }}{{ none is none }}{{ false is false }}{{ {} is mapping }}"
                        "{{ 4 is divisibleby 2 }}{{ x is not defined }}"),
            "TrueTrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(chat_render("{{ 'a</think>\\n\\nb'.split('</think>')[-1].lstrip('\\n') }}{{ 'xabx'.strip('x') }}"
                        "{{ ' a  b '.split() }}{{ 'ab'.startswith('a') }}{{ 'ab'.endswith('a') }}{{ 'aXa'.replace('a', 'b') }}"),
            "bab['a', 'b']TrueFalsebXb");
}

TEST(ChatTemplate, OptionsBecomeVariables) {
  ChatTemplateOptions options;
  options.add_generation_prompt = true;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  options.variables["enable_thinking"] = false;
  std::tm date{};
  date.tm_year = 124;
  date.tm_mon = 6;
  date.tm_mday = 26;
  options.now = date;
  EXPECT_EQ(chat_render("{{ bos_token }}{{ add_generation_prompt }}{{ eos_token }}{{ enable_thinking is false }}"
                        "{{ tools is none }}{{ strftime_now('%d %b %Y') }}",
                        {}, options),
            "<s>True</s>TrueTrue26 Jul 2024");
  const ChatTemplate compiled("{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}");
  EXPECT_EQ(compiled.render({{"user", "one"}}, {}), "user:one;");
  EXPECT_EQ(compiled.render({{"user", "two"}, {"assistant", "three"}}, {}), "user:two;assistant:three;");
}

TEST(ChatTemplate, RaiseExceptionThrowsItsMessage) {
  EXPECT_EQ(error_of([] { chat_render("{% if true %}{{ raise_exception('Roles must alternate') }}{% endif %}"); }),
            "Roles must alternate");
}

TEST(ChatTemplate, RefusesWhatItDoesNotSupportInOneLine) {
  const auto refusal = [](const char* text) { return error_of([text] { ChatTemplate{text}; }); };
  EXPECT_EQ(refusal("a\n{% macro m() %}{% endmacro %}"), "chat template line 2: the {% macro %} tag is not supported");
  EXPECT_EQ(refusal("{{ x|upper }}"), "chat template line 1: the filter 'upper' is not supported");
  EXPECT_EQ(refusal("{{ x is callable }}"), "chat template line 1: the test 'is callable' is not supported");
  EXPECT_EQ(refusal("{{ cycler(1) }}"), "chat template line 1: the function cycler() is not supported");
  EXPECT_EQ(refusal("{{ x.format(1) }}"), "chat template line 1: the method .format() is not supported");
  EXPECT_EQ(refusal("{{ 2 ** 3 }}"), "chat template line 1: the operator ** is not supported");
  EXPECT_EQ(refusal("{% if x %}"), "chat template line 1: {% if %} is not closed");
  EXPECT_EQ(refusal("{% endfor %}"), "chat template line 1: {% endfor %} without its opening tag");
  EXPECT_EQ(refusal("{% set x %}y{% endset %}"), "chat template line 1: {% set %} blocks (without '=') are not supported");
  EXPECT_EQ(refusal("{{ 'a' "), "chat template line 1: a {{ is not closed");
  EXPECT_EQ(refusal("{% break %}"), "chat template line 1: the {% break %} tag is not supported");
}

}  // namespace
}  // namespace kiln
