// alerts.command (docs/alerts.md): the user's command, run through /bin/sh -c with one alert
// as a JSON object on its stdin, so an alert can reach Slack, email or a pager. Training never
// waits for it: each runs in the background, at most kMaxInFlight at once (more are dropped
// with a warning), and is killed with its children after the timeout. Its environment is
// kiln's without the dashboard's token (KILN_TOKEN); it starts as base/child_process.h starts
// every child, in a process group of its own with stdin (the alert), kiln's stdout and stderr,
// and no other descriptor of kiln's (not the dashboard's socket, not the store).
#pragma once

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>

namespace kiln {

class AlertHook {
 public:
  static constexpr int kMaxInFlight = 4;

  // `out` takes the one-line warnings: a hook dropped, failed or killed.
  AlertHook(std::string command, double timeout_s, std::FILE* out);
  // Waits for the hooks still running (each at most its timeout), so an alert that comes
  // just before the run ends still gets out.
  ~AlertHook();
  AlertHook(const AlertHook&) = delete;
  AlertHook& operator=(const AlertHook&) = delete;

  // Starts the command with `input` on its stdin; false when it could not start or too many
  // are running (after a warning naming `what`).
  bool run(const std::string& input, const std::string& what);

 private:
  void watch(int pid, std::string what);

  std::string command_;
  double timeout_s_;
  std::FILE* out_;
  std::mutex mutex_;
  std::condition_variable done_;
  int in_flight_ = 0;
};

}  // namespace kiln
