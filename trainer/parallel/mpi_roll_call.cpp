#include "trainer/parallel/mpi_roll_call.h"

#include <mpi.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "trainer/parallel/host_spans.h"

namespace kiln {
namespace {

constexpr int kRollAsk = 1, kRollAnswer = 2;

MPI_Comm roll_comm = MPI_COMM_NULL;
int roll_rank = 0, roll_size = 1;
std::vector<std::string> roll_hosts;  // on rank 0, each rank's
std::string own_host;                 // this process's
bool several_hosts = false;           // whether the ranks are on more than one host

}  // namespace

void open_roll_call() {
  MPI_Comm_dup(MPI_COMM_WORLD, &roll_comm);
  MPI_Comm_set_errhandler(roll_comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(roll_comm, &roll_rank);
  MPI_Comm_size(roll_comm, &roll_size);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  std::vector<char> all(roll_rank == 0 ? static_cast<size_t>(roll_size) * MPI_MAX_PROCESSOR_NAME : 0);
  own_host.assign(name, strnlen(name, MPI_MAX_PROCESSOR_NAME));
  MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, roll_comm);
  int several = 0;
  for (int r = 0; roll_rank == 0 && r < roll_size; ++r) {
    const char* at = all.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    roll_hosts.emplace_back(at, strnlen(at, MPI_MAX_PROCESSOR_NAME));
    several = several || roll_hosts.back() != roll_hosts.front();
  }
  // One int, not every name on every rank: a rank needs only its own host to name itself.
  MPI_Bcast(&several, 1, MPI_INT, 0, roll_comm);
  several_hosts = several != 0;
}

void close_roll_call() {
  if (roll_comm != MPI_COMM_NULL) MPI_Comm_free(&roll_comm);
}

std::string rank_on_host(int rank) {
  if (!several_hosts) return "rank " + std::to_string(rank);
  if (rank == roll_rank) return "rank " + std::to_string(rank) + " on " + own_host;
  if (roll_rank == 0) return describe_ranks_by_host({rank}, roll_hosts);
  return "rank " + std::to_string(rank);
}

void answer_roll_call() {
  if (roll_comm == MPI_COMM_NULL || roll_rank == 0) return;
  int asked = 0;
  if (MPI_Iprobe(0, kRollAsk, roll_comm, &asked, MPI_STATUS_IGNORE) != MPI_SUCCESS || !asked) return;
  int call = 0;
  MPI_Recv(&call, 1, MPI_INT, 0, kRollAsk, roll_comm, MPI_STATUS_IGNORE);
  // One int, sent eagerly: the request is let go, as the run is on its way out.
  MPI_Request request;
  if (MPI_Isend(&roll_rank, 1, MPI_INT, 0, kRollAnswer, roll_comm, &request) == MPI_SUCCESS) MPI_Request_free(&request);
}

std::string call_roll(double seconds) {
  if (roll_comm == MPI_COMM_NULL || roll_rank != 0 || roll_size < 2) return "";
  static const int call = 1;
  for (int peer = 1; peer < roll_size; ++peer) {
    MPI_Request request;
    if (MPI_Isend(&call, 1, MPI_INT, peer, kRollAsk, roll_comm, &request) == MPI_SUCCESS) MPI_Request_free(&request);
  }
  std::vector<bool> answered(static_cast<size_t>(roll_size), false);
  answered[0] = true;
  int heard = 1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (heard < roll_size && std::chrono::steady_clock::now() < deadline) {
    int arrived = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kRollAnswer, roll_comm, &arrived, &status) != MPI_SUCCESS) break;
    if (!arrived) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    int who = 0;
    MPI_Recv(&who, 1, MPI_INT, status.MPI_SOURCE, kRollAnswer, roll_comm, MPI_STATUS_IGNORE);
    if (!answered[static_cast<size_t>(status.MPI_SOURCE)]) ++heard;
    answered[static_cast<size_t>(status.MPI_SOURCE)] = true;
  }
  std::vector<int> missing;
  for (int r = 0; r < roll_size; ++r)
    if (!answered[static_cast<size_t>(r)]) missing.push_back(r);
  if (missing.empty())
    return "every rank answered a roll call, so none is lost: they wait for each other at different calls";
  return describe_ranks_by_host(missing, roll_hosts) + " did not answer a roll call (dead, frozen or cut off)";
}

}  // namespace kiln
