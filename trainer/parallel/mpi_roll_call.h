// Who is still there when a wait gives up. A wait that times out knows the call and the ranks
// of its group, not which of them is missing: every live rank of a run that lost one ends up
// waiting somewhere. So rank 0, as its wait gives up, calls the roll over a communicator of
// its own: every rank that is still running answers at once from wherever it waits (every
// wait past its first 10 ms polls for the call, and so does a rank that already gave up and waits for rank 0's
// word), and the ranks that do not answer within a short window are the ones that died, froze
// or were cut off. Rank 0 names them, with their hosts, in the line it prints and records.
// One roll call per process, opened and closed by MpiSession.
#pragma once

#include <string>

namespace kiln {

// After MPI_Init, on every rank together: the roll call's own communicator, and every rank's
// host name gathered to rank 0.
void open_roll_call();
void close_roll_call();

// "rank 2 on node-1" where the run's ranks are on more than one host, else "rank 2": the host
// as far as this process knows it (rank 0 knows every rank's, every rank its own; another
// rank's elsewhere is left out). For the lines that name a rank which failed on its own.
std::string rank_on_host(int rank);

// On a rank other than 0: answers a roll call rank 0 has made, if it has.
void answer_roll_call();

// On rank 0 (elsewhere ""): calls the roll and waits up to `seconds` for the answers. The
// clause naming who did not answer ("rank 2 on node-1 did not answer a roll call"), or that
// every rank did.
std::string call_roll(double seconds);

}  // namespace kiln
