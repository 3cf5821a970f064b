// One visitor from several lambdas, for std::visit over a variant whose alternatives need
// different code (the standard's own example, which the standard library does not ship).
#pragma once

namespace kiln {

template <typename... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};

}  // namespace kiln
