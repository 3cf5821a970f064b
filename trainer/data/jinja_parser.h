// Parses a chat template into its syntax tree (jinja_syntax.h), refusing what it does not
// support in one line that names the construct and the template line.
#pragma once

#include <string>

#include "trainer/data/jinja_syntax.h"

namespace kiln::jinja {

Template parse(const std::string& source);

}  // namespace kiln::jinja
