#include "cli/parse_error.h"

#include <algorithm>
#include <cctype>

#include "base/check.h"
#include "base/closest_word.h"

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

void check_command_words(const CLI::App& app, const std::vector<std::string>& args) {
  const CLI::App* command = &app;
  std::string path;  // the command words read so far: "", "runs", ...
  for (size_t i = 0;; ++i) {
    const std::vector<const CLI::App*> subcommands = command->get_subcommands({});
    // A command without positional arguments reads a bare word after its name as one of its
    // commands; any other word is left to the parser.
    const bool takes_words = !command->get_options([](const CLI::Option* o) { return o->get_positional(); }).empty();
    if (subcommands.empty() || takes_words) return;
    std::vector<std::string> names;
    for (const CLI::App* s : subcommands) names.push_back(s->get_name());
    std::string listed;
    for (const std::string& name : names) listed += (listed.empty() ? "" : ", ") + name;
    const std::string kiln_path = "kiln" + (path.empty() ? "" : " " + path);
    if (i == args.size()) {
      if (command->get_require_subcommand_min() > 0)
        fail(kiln_path + " needs a command: " + listed + " (" + kiln_path + " --help says what each does)");
      return;
    }
    const std::string& word = args[i];
    if (word.empty() || word[0] == '-') return;
    const auto named = std::find(names.begin(), names.end(), word);
    if (named == names.end()) {
      const std::string prefix = path.empty() ? "" : path + " ";
      const std::string guess = closest_word(word, names);
      fail("unknown command " + prefix + word +
           (guess.empty() ? "; " + kiln_path + "'s commands are " + listed : did_you_mean(prefix + guess)));
    }
    command = subcommands[static_cast<size_t>(named - names.begin())];
    path += (path.empty() ? "" : " ") + word;
  }
}

}  // namespace kiln
