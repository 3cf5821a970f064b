// Renders a parsed chat template (jinja_syntax.h) with its variables, as Jinja would under
// transformers' apply_chat_template: raise_exception() and strftime_now() as globals,
// tojson as json.dumps(ensure_ascii=False).
#pragma once

#include <ctime>
#include <string>
#include <utility>
#include <vector>

#include "trainer/data/jinja_syntax.h"

namespace kiln::jinja {

struct RenderInput {
  std::vector<std::pair<std::string, Value>> variables;
  std::tm now{};  // what strftime_now() formats
};

// A kiln::Error "chat template line N: ..." when the template fails (a type it cannot take, a
// missing attribute of undefined); raise_exception(message) throws its message as it is.
std::string render(const Template& compiled, const RenderInput& input);

}  // namespace kiln::jinja
