// Every bound the dashboard server puts on what one client can cost it, in one place
// (docs/dashboard.md#limits lists them for users). Where a limit is an option, this holds
// its default.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace kiln::monitor::limits {

// An HTTP request: its header and body (the API's bodies are small JSON objects), and the
// time a client has to send it before the connection closes.
inline constexpr uint32_t kHeaderBytes = 8 * 1024;
inline constexpr uint64_t kBodyBytes = 64 * 1024;
inline constexpr std::chrono::seconds kReadTimeout{30};
// Each write of an answer (each chunk of a streamed one): a client that stops reading is
// dropped rather than holding its connection forever.
inline constexpr std::chrono::seconds kWriteTimeout{30};
// After an answer that closes the connection: how long the rest of what the client sends is
// read and dropped, so closing does not reset the connection under the answer.
inline constexpr std::chrono::seconds kDrainTimeout{5};

// Connections at once (--max-connections) and WebSocket subscribers at once
// (--max-subscribers); past either, 503 with Retry-After and the connection closes.
inline constexpr size_t kDefaultMaxConnections = 256;
inline constexpr size_t kDefaultMaxSubscribers = 128;
// Bytes the server holds at once for its clients to read: the answers being sent and the
// messages queued for WebSocket clients, all together. Far more than the largest answer (a
// metrics answer of kMaxAnswerPoints is about 25 MiB), so only many slow readers of large
// answers at once meet it; then an answer is refused with 503 and Retry-After, and a live
// client whose next message does not fit is disconnected (it reconnects and reloads).
inline constexpr size_t kMaxUnsentBytes = size_t{256} << 20;
inline constexpr std::chrono::seconds kRetryAfter{1};

// When accepting fails (out of file descriptors, say), the listener waits this long before
// trying again, doubling up to the most, instead of spinning a core on an error that lasts.
inline constexpr std::chrono::milliseconds kAcceptRetryFirst{50};
inline constexpr std::chrono::milliseconds kAcceptRetryMost{1000};

// Stores one server shows (`kiln serve --store A --store B ...`, `--stores DIR`), and the
// connections each store's pool keeps open between requests: the server's threads borrow
// one at a time each, so a few suffice, and 64 stores then hold a few hundred descriptors
// at most, however many requests come and go.
inline constexpr size_t kMaxStores = 64;
inline constexpr size_t kMaxIdleStoreConnections = 4;

// GET /api/runs/{run}/metrics: keys (there are 17 metric columns, so more would repeat
// one), ranks named in one request, and points per rank (0, "every row", is capped at this
// too: a longer range comes downsampled to it).
inline constexpr size_t kMaxSeriesKeys = 17;
inline constexpr size_t kMaxSeriesRanks = 1024;
inline constexpr int64_t kMaxSeriesPoints = 100000;
inline constexpr int64_t kDefaultSeriesPoints = 1000;
// Series (keys x ranks) in one answer: each reads its rank's rows or blocks on its own, so
// the work of an answer grows with them (every rank's one key, or every key of 60 ranks).
inline constexpr size_t kMaxAnswerSeries = 1024;
// Points in one metrics answer over all its keys and ranks (each series gets its share, at
// least one): a point is five numbers, up to about 100 bytes of JSON and as much again in
// the tree built for it, so one answer costs at most about 50 MiB while it is built.
inline constexpr size_t kMaxAnswerPoints = size_t{1} << 18;
// Rows one metrics answer reads for its downsampled series (store/metric_queries.h:
// SeriesQuery::max_rows), about a quarter of a second of SQLite's time: past them its
// series come from the 64-step blocks, and past as many blocks from the 4,096-step
// superblocks (a block reads about as fast as a row), so a chart of 1024 ranks of any length
// answers within the bound. One rank's series of up to 262,144 steps still comes from its rows.
inline constexpr size_t kMaxAnswerRows = size_t{1} << 18;
// The points each of an answer's `series` gets when `asked` were asked for each.
constexpr size_t points_per_series(size_t asked, size_t series) {
  const size_t share = kMaxAnswerPoints / (series == 0 ? 1 : series);
  return asked < share ? asked : share < 1 ? 1 : share;
}

// GET /api/runs/{run}/experts: steps per MoE layer (a longer range comes downsampled to
// them), and the per-expert counts one answer may hold over all its layers (each layer gets
// fewer steps when its experts would pass it: 1 MiB counts are a few MiB of JSON). The live
// stream's `experts` message holds the newest whole steps of at most this many rows (two
// steps of the most layers a step may have).
inline constexpr int64_t kDefaultExpertSteps = 500;
inline constexpr int64_t kMaxExpertSteps = 2000;
inline constexpr size_t kMaxExpertCells = size_t{1} << 20;
inline constexpr size_t kMaxExpertRowsPerPoll = 1024;

// GET /api/runs: runs in one answer (a page; offset pages on). GET /api/config-keys: the
// keys of each store's newest kConfigKeyRuns runs (runs of one kiln version record every
// key), at most kMaxConfigKeys.
inline constexpr int64_t kDefaultRunsPage = 200;
inline constexpr int64_t kMaxRunsPage = 1000;
inline constexpr size_t kConfigKeyRuns = 500;
inline constexpr size_t kMaxConfigKeys = 2000;

// GET /api/sweeps: sweeps in one answer (newest first), far more than a person keeps.
inline constexpr int64_t kMaxSweeps = 1000;

// The CSV export streams in chunks of this many rows, each read with the store let go of
// between them, so an export of any size costs the server one chunk of memory.
inline constexpr size_t kCsvRowsPerChunk = 1024;

// A WebSocket client: messages queued for it (one that stops reading is disconnected once
// that many wait), and the largest message it may send (clients only listen).
inline constexpr size_t kMaxQueuedMessages = 4096;
// ...and the bytes of those messages, since a count alone does not bound memory: a message
// may hold one step of a few kB or a poll's backlog of MBs. 16 MiB is the count's worth of
// ordinary messages (a step of up to 8 ranks' rows, or a wide step's rank 0 row and spread:
// a few kB each), several of the largest any limit here allows (a samples message, 100 x 32
// KiB); all clients' queues together are within kMaxUnsentBytes. A message
// into an empty queue always goes: the bound is on a client falling behind, not on the size
// of what the run logged.
inline constexpr size_t kMaxQueuedBytes = size_t{16} << 20;
inline constexpr size_t kMaxIncomingMessage = 4096;
// Its handshake, and how long it may stay silent (pinged halfway) before it is closed.
inline constexpr std::chrono::seconds kWebsocketHandshakeTimeout{30};
inline constexpr std::chrono::seconds kWebsocketIdleTimeout{300};

// Stopping: how long live clients get to receive what is queued for them.
inline constexpr std::chrono::seconds kCloseGrace{2};

}  // namespace kiln::monitor::limits
