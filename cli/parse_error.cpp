#include "cli/parse_error.h"

#include <cctype>

namespace kiln {

std::string parse_error_line(const CLI::ParseError& error, const std::vector<std::string>& args) {
  // `--set train.lr 3e-4`: the parser sees a stray 3e-4; what went wrong is the space.
  if (dynamic_cast<const CLI::ExtrasError*>(&error))
    for (size_t i = 0; i + 2 < args.size(); ++i)
      if (args[i] == "--set" && args[i + 1].find('=') == std::string::npos)
        return "--set " + args[i + 1] + " " + args[i + 2] + ": write --set key=value as one word, here --set " +
               args[i + 1] + "=" + args[i + 2];
  std::string line = error.what();
  if (!line.empty()) line[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(line[0])));
  return line + " (see --help)";
}

}  // namespace kiln
