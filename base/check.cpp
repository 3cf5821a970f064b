#include "base/check.h"

namespace kiln {

void fail(const std::string& message) { throw Error(message); }

}  // namespace kiln
