#include "launch/train_command.h"

#include <filesystem>

#include "base/check.h"

namespace kiln::launch {

ChildCommand train_child(const TrainCommand& command) {
  ChildCommand child;
  child.argv = {command.kiln, "train"};
  child.argv.insert(child.argv.end(), command.args.begin(), command.args.end());
  if (command.ranks > 1) child.argv.insert(child.argv.end(), {"--ranks", std::to_string(command.ranks)});
  child.environment = command.environment;
  child.detached = command.detached;
  child.log_path = command.log_path;
  return child;
}

std::string this_kiln() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) fail("cannot find this kiln binary to start again (/proc/self/exe: " + ec.message() + ")");
  return exe.string();
}

}  // namespace kiln::launch
