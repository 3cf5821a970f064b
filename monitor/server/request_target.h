// A request's target ("/api/runs/7/metrics?keys=loss,lr&points=500") split into decoded path
// segments and query parameters.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::monitor {

struct RequestTarget {
  std::vector<std::string> segments;  // "/api/runs/7" -> {"api", "runs", "7"}
  std::map<std::string, std::string> query;

  // A parameter's value, if given and not empty.
  std::optional<std::string> text(const std::string& name) const;
  // Numbers and comma-separated lists; a value that does not parse is an ApiError (400)
  // naming the parameter.
  std::optional<int64_t> integer(const std::string& name) const;
  std::optional<double> number(const std::string& name) const;
  std::vector<std::string> list(const std::string& name) const;
};

// A target that is not an absolute path, or holds a bad percent-escape, is an ApiError (400).
RequestTarget parse_target(std::string_view target);

}  // namespace kiln::monitor
