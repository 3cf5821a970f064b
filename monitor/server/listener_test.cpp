// Out of file descriptors, the listener cannot accept: it waits and tries again instead of
// spinning a core on the error, and answers the waiting client once descriptors are free.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "monitor/server/server_fixture.h"
#include "monitor/server/test_client.h"

namespace kiln::monitor::test {
namespace {

double cpu_seconds_of_this_process() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Lowers this process's descriptor limit and takes every descriptor left but `spare`;
// gives them and the limit back when it goes.
class DescriptorsTaken {
 public:
  explicit DescriptorsTaken(int spare) {
    getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit low = saved_;
    low.rlim_cur = std::min<rlim_t>(saved_.rlim_cur, 1024);  // few to take
    setrlimit(RLIMIT_NOFILE, &low);
    for (int fd; (fd = open("/dev/null", O_RDONLY)) >= 0;) taken_.push_back(fd);
    EXPECT_EQ(errno, EMFILE);
    for (int i = 0; i < spare && !taken_.empty(); ++i) {
      close(taken_.back());
      taken_.pop_back();
    }
  }
  ~DescriptorsTaken() {
    for (const int fd : taken_) close(fd);
    setrlimit(RLIMIT_NOFILE, &saved_);
  }

 private:
  rlimit saved_{};
  std::vector<int> taken_;
};

TEST_F(ServerTest, OutOfDescriptorsTheListenerWaitsAndThenAnswers) {
  ASSERT_EQ(get(port_, "/api/runs", {kAuth}).status, 200u);  // the store's connection is open and pooled
  net::io_context io;
  tcp::socket client(io);
  {
    // The client takes the one descriptor left, so the server cannot accept it.
    DescriptorsTaken taken(1);
    client.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port_));
    const std::string request = "GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n" + kAuthLine + "Connection: close\r\n\r\n";
    net::write(client, net::buffer(request));
    const double cpu_before = cpu_seconds_of_this_process();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    // Spinning on the failed accept would take most of a core for the whole wait.
    EXPECT_LT(cpu_seconds_of_this_process() - cpu_before, 0.1);
  }
  // Descriptors are free again: the server accepts within its longest wait and answers.
  beast::flat_buffer buffer;
  http::response<http::string_body> response;
  beast::error_code error;
  bool answered = false;
  http::async_read(client, buffer, response, [&](beast::error_code e, size_t) {
    error = e;
    answered = true;
  });
  io.run_for(std::chrono::seconds(5));
  ASSERT_TRUE(answered) << "no answer once descriptors were free";
  ASSERT_FALSE(error) << error.message();
  EXPECT_EQ(response.result_int(), 200u);
}

// Boost.Asio opens sockets without close-on-exec; the server sets it on its listening socket
// and on every connection it accepts, so no program this process starts takes them along.
TEST_F(ServerTest, TheListeningSocketAndEveryConnectionAreCloseOnExec) {
  LiveClient follower(port_, "/api/runs/beta/live", {kAuth});  // an accepted connection, held open
  ASSERT_EQ(follower.next()["type"], "hello");
  int servers = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(entry.path().filename().string());
    sockaddr_in local{};
    socklen_t size = sizeof local;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &size) != 0 || local.sin_family != AF_INET) continue;
    if (ntohs(local.sin_port) != port_) continue;  // the clients' own ends have other ports
    ++servers;
    EXPECT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC) << "descriptor " << fd << " of the server's port";
  }
  EXPECT_GE(servers, 2) << "the listening socket and the follower's connection";
}

}  // namespace
}  // namespace kiln::monitor::test
