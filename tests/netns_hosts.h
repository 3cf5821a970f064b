// The tests' stand-in for several machines: hosts made by scripts/netns-hosts (network and UTS
// namespaces on a bridge of their own), removed again when the fixture goes, also when a test
// fails. Needs root; without it the tests that use it skip, saying so.
#pragma once

#include <string>

namespace kiln::test {

class NetnsHosts {
 public:
  // Hosts NAME-0 .. NAME-(count-1); `tag` (one lower-case letter) tells apart the fixtures of
  // tests that run at once, and the process id the test binaries.
  NetnsHosts(char tag, int count);
  ~NetnsHosts();
  NetnsHosts(const NetnsHosts&) = delete;
  NetnsHosts& operator=(const NetnsHosts&) = delete;

  // Whether the hosts are up; why not, when they are not.
  bool up() const { return why_not_.empty(); }
  const std::string& why_not() const { return why_not_; }

  const std::string& name() const { return name_; }
  std::string host(int i) const { return name_ + "-" + std::to_string(i); }
  // The start of a command line that runs mpirun on host 0 across the hosts; add -np, the
  // mapping and the command.
  std::string mpirun() const;
  // The start of a command line that runs a command on host i.
  std::string on(int i) const;
  // The start of a command line that runs, on host 0, a command that starts mpirun itself
  // (kiln train --hostfile), with the settings that reach the hosts in its environment.
  std::string launch() const;
  // The hosts' hostfile, every host with 64 slots.
  std::string hostfile() const { return "/run/kiln-hosts/" + name_ + "/hostfile"; }

 private:
  std::string script() const;
  std::string name_;
  std::string why_not_;
};

}  // namespace kiln::test
