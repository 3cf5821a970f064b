#include "base/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <cstring>

#include "base/check.h"
#include "base/private_files.h"

extern char** environ;

namespace kiln {
namespace {

std::vector<char*> pointers(std::vector<std::string>& texts) {
  std::vector<char*> out;
  for (std::string& t : texts) out.push_back(t.data());
  out.push_back(nullptr);
  return out;
}

// What posix_spawn needs, released however the start ends.
class SpawnSetup {
 public:
  SpawnSetup() {
    posix_spawn_file_actions_init(&files);
    posix_spawnattr_init(&attributes);
  }
  ~SpawnSetup() {
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&files);
    if (log >= 0) ::close(log);
  }
  SpawnSetup(const SpawnSetup&) = delete;
  SpawnSetup& operator=(const SpawnSetup&) = delete;

  posix_spawn_file_actions_t files;
  posix_spawnattr_t attributes;
  int log = -1;
};

}  // namespace

pid_t start_child(const ChildCommand& command) {
  KILN_CHECK(!command.argv.empty(), "start_child: no program to start");
  SpawnSetup setup;
  // The file actions run in the child in this order: stdin, then stdout and stderr, then
  // every other descriptor closed (the log's own among them, once it is stdout).
  if (command.stdin_fd >= 0) posix_spawn_file_actions_adddup2(&setup.files, command.stdin_fd, STDIN_FILENO);
  else posix_spawn_file_actions_addopen(&setup.files, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (!command.log_path.empty()) {
    setup.log = open_private_log(command.log_path);
    posix_spawn_file_actions_adddup2(&setup.files, setup.log, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&setup.files, setup.log, STDERR_FILENO);
  }
  if (command.stdout_fd >= 0) posix_spawn_file_actions_adddup2(&setup.files, command.stdout_fd, STDOUT_FILENO);
  if (command.stderr_fd >= 0) posix_spawn_file_actions_adddup2(&setup.files, command.stderr_fd, STDERR_FILENO);
  posix_spawn_file_actions_addclosefrom_np(&setup.files, STDERR_FILENO + 1);

  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&setup.attributes, &all);
  posix_spawnattr_setsigmask(&setup.attributes, &none);
  short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
  if (command.detached) {
    flags |= POSIX_SPAWN_SETSID;
  } else {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&setup.attributes, 0);
  }
  posix_spawnattr_setflags(&setup.attributes, flags);

  std::vector<std::string> argv = command.argv;
  std::vector<char*> argv_pointers = pointers(argv);
  std::vector<std::string> environment = command.environment.value_or(std::vector<std::string>{});
  std::vector<char*> environment_pointers = pointers(environment);
  pid_t pid = -1;
  // posix_spawnp searches PATH only for a name without a '/'. It reports a program that
  // cannot be executed as its own failure, not as a child that exits at once.
  const int error = posix_spawnp(&pid, argv[0].c_str(), &setup.files, &setup.attributes, argv_pointers.data(),
                                 command.environment ? environment_pointers.data() : environ);
  if (error != 0) fail("cannot start " + command.argv[0] + ": " + std::strerror(error));
  return pid;
}

void close_all_but_standard_streams() { ::closefrom(STDERR_FILENO + 1); }

}  // namespace kiln
