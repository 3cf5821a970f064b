#include "tests/netns_hosts.h"

#include <unistd.h>

#include "tests/run_command.h"

namespace kiln::test {

NetnsHosts::NetnsHosts(char tag, int count) : name_("k" + std::string(1, tag) + std::to_string(::getpid() % 100000)) {
  if (::geteuid() != 0) {
    why_not_ = "not root: network namespaces need it";
    return;
  }
  const CommandResult r = run_command(script() + " up " + name_ + " " + std::to_string(count));
  if (r.exit_code != 0) why_not_ = "scripts/netns-hosts up failed: " + r.output;
}

NetnsHosts::~NetnsHosts() {
  if (::geteuid() == 0) run_command(script() + " down " + name_);
}

std::string NetnsHosts::script() const { return source_dir() + "/scripts/netns-hosts"; }

std::string NetnsHosts::mpirun() const { return script() + " mpirun " + name_ + " "; }

std::string NetnsHosts::launch() const { return script() + " launch " + name_ + " "; }

std::string NetnsHosts::on(int i) const { return script() + " exec " + name_ + " " + host(i) + " "; }

}  // namespace kiln::test
