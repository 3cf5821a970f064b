// End-to-end: `kiln runs` over a store the test fills with RunWriter, as `kiln train` would.
// Times are pinned (the rows' times are rewritten after writing and TZ=UTC is set), so the
// tables can be checked cell by cell.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "store/database.h"
#include "store/export.h"
#include "store/run_writer.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using store::RunStatus;

double utc(int year, int month, int day, int hour, int minute, int second = 0) {
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  return static_cast<double>(timegm(&tm));
}

// 2024-11-20 14:00 UTC: when the baseline run started.
const double kBaselineStart = utc(2024, 11, 20, 14, 0);
// 2024-11-21 09:30 UTC: when the lr-high run started.
const double kHighStart = utc(2024, 11, 21, 9, 30);

// `kiln runs ARGS` against a store, in UTC so local times are known.
CommandResult kiln_runs(const std::string& store, const std::string& subcommand,
                        const std::string& args = "") {
  return run_command("TZ=UTC " + kiln + " runs " + subcommand + " --store " + store + " " + args);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A table line's cells: columns are separated by two or more spaces.
std::vector<std::string> cells(const std::string& line) {
  static const std::regex gap(" {2,}");
  const std::string trimmed = std::regex_replace(line, std::regex("^ +| +$"), "");
  return {std::sregex_token_iterator(trimmed.begin(), trimmed.end(), gap, -1),
          std::sregex_token_iterator()};
}

// The table row whose cell `column` is `key`.
std::vector<std::string> row_with(const std::string& output, size_t column, const std::string& key) {
  for (const auto& line : lines_of(output)) {
    const auto row = cells(line);
    if (row.size() > column && row[column] == key) return row;
  }
  return {};
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string config(double lr) {
  return json{{"model",
               {{"arch", "gpt2"},
                {"n_layer", 2},
                {"n_head", 2},
                {"d_model", 64},
                {"seq_len", 32},
                {"vocab_size", 257}}},
              {"train", {{"steps", 100}, {"global_batch", 8}, {"micro_batch", 4}, {"lr", lr}}}}
      .dump();
}

store::MetricRow metric(int64_t step, int rank, double time, double loss, double tokens_per_s,
                        double tflops, double mfu) {
  store::MetricRow row;
  row.step = step;
  row.rank = rank;
  row.time = time;
  row.tokens = step * 256;
  row.loss = loss;
  row.lr = 1e-3;
  row.grad_norm = 0.5;
  row.tokens_per_s = tokens_per_s;
  row.tflops = tflops;
  row.mfu = mfu;
  row.mem_used = int64_t{1} << 20;
  row.mem_peak = int64_t{2} << 20;
  return row;
}

store::RunInfo info(const std::string& name, double lr, std::vector<std::string> tags = {}) {
  store::RunInfo i;
  i.name = name;
  i.config_json = config(lr);
  i.layout = "tp1.pp1.dp2";
  i.backend = "cpu";
  i.device = "Test CPU";
  i.host = "h1";
  i.command_line = "kiln train --set train.lr=" + std::to_string(lr);
  i.tags = std::move(tags);
  return i;
}

void set_times(const std::string& path, const std::string& name, double created, double started,
               std::optional<double> ended) {
  store::Database db(path, store::Access::ReadWrite);
  store::Statement st(db,
                      "UPDATE runs SET created_at = ?, started_at = ?, ended_at = ? WHERE name = ?");
  st.bind_all(created, started, ended, name);
  st.run();
}

// baseline (completed, 2 ranks, steps 10 and 20, a validation loss and a checkpoint) and
// lr-high (failed after step 10). Neither has a writer open afterwards.
void write_finished_runs(const std::string& path) {
  {
    store::RunWriter writer(path);
    writer.create_run(info("baseline", 0.001, {"kjv", "base"}));
    const double t = kBaselineStart;
    writer.log_metrics({metric(10, 0, t + 60, 3.1, 900, 10, 0.35),
                        metric(10, 1, t + 60, 3.3, 900, 20, 0.15)});
    writer.log_metrics({metric(20, 0, t + 120, 2.5, 1000, 10, 0.4),
                        metric(20, 1, t + 120, 2.7, 1000, 20, 0.2)});
    writer.log_valid({20, t + 121, 2.9});
    writer.log_checkpoint({20, "/ckpt/baseline-20", int64_t{1} << 20, "tp1.pp1.dp2", t + 125, 3.5});
    writer.log_event(store::event_kind::kStatus, "a note from the trainer", 20);
    writer.finish(RunStatus::Completed);
    writer.flush();
  }
  set_times(path, "baseline", kBaselineStart, kBaselineStart, kBaselineStart + 300);
  {
    store::RunWriter writer(path);
    writer.create_run(info("lr-high", 0.003));
    writer.log_metrics({metric(10, 0, kHighStart + 30, 3.0, 800, 12, 0.3)});
    writer.finish(RunStatus::Failed, "loss is NaN at step 15");
    writer.flush();
  }
  set_times(path, "lr-high", kHighStart, kHighStart, kHighStart + 90);
}

// A run whose process died: still `running` in the store, heartbeat two hours old.
// Returns that heartbeat's time.
double write_dead_run(const std::string& path) {
  {
    store::RunWriter writer(path);
    writer.create_run(info("dead", 0.002));
    writer.flush();
  }
  const double two_hours_ago = store::unix_now() - 7200;
  set_times(path, "dead", two_hours_ago, two_hours_ago, std::nullopt);
  store::Database db(path, store::Access::ReadWrite);
  store::Statement st(db, "UPDATE runs SET heartbeat_at = ? WHERE name = 'dead'");
  st.bind_all(two_hours_ago);
  st.run();
  return two_hours_ago;
}

std::string utc_text(double unix_s) {
  const auto t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
  return text;
}

// A live run: created now, its writer keeps its heartbeat fresh while the test runs.
std::unique_ptr<store::RunWriter> start_live_run(const std::string& path,
                                                 const std::string& name = "live") {
  auto writer = std::make_unique<store::RunWriter>(path);
  writer->create_run(info(name, 0.001));
  return writer;
}

// Plays the training process: waits for the next pending command and decides it.
std::thread answer_next_command(store::RunWriter& writer, store::CommandStatus status,
                                int64_t step, std::string reason = {}) {
  return std::thread([&writer, status, step, reason] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      const auto pending = writer.pending_commands();
      if (!pending.empty()) {
        writer.mark_command(pending.front().id, status, step, reason);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
}

class RunsCli : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_dir(std::string("runs_cli_") +
                     testing::UnitTest::GetInstance()->current_test_info()->name());
    store_ = dir_ + "/runs.db";
  }
  std::string dir_, store_;
};

// ---- list ----

TEST_F(RunsCli, ListShowsRunsNewestFirstWithTheirLatestFigures) {
  write_finished_runs(store_);
  const double heartbeat = write_dead_run(store_);
  const CommandResult r = kiln_runs(store_, "list");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto lines = lines_of(r.output);
  ASSERT_EQ(lines.size(), 4u) << r.output;
  EXPECT_EQ(cells(lines[0]),
            (std::vector<std::string>{"ID", "NAME", "STATUS", "TAGS", "LAYOUT", "DEVICE", "STEP",
                                      "LOSS", "TOK/S", "MFU", "STARTED", "DURATION"}));
  // Newest first: dead (two hours ago), lr-high (2024-11-21), baseline (2024-11-20).
  EXPECT_EQ(cells(lines[1])[1], "dead");
  EXPECT_EQ(cells(lines[1])[2], "lost");
  EXPECT_EQ(cells(lines[1])[6], "-/100");
  EXPECT_EQ(cells(lines[2]),
            (std::vector<std::string>{"2", "lr-high", "failed", "-", "tp1.pp1.dp2", "cpu Test CPU",
                                      "10/100", "3.0000", "800", "30.0%", "2024-11-21 09:30",
                                      "1m30s"}));
  // The latest step's figures are means over ranks: (2.5 + 2.7) / 2, (0.4 + 0.2) / 2.
  EXPECT_EQ(cells(lines[3]),
            (std::vector<std::string>{"1", "baseline", "completed", "kjv,base", "tp1.pp1.dp2",
                                      "cpu Test CPU", "20/100", "2.6000", "1.0k", "30.0%",
                                      "2024-11-20 14:00", "5m00s"}));

  const CommandResult dead = kiln_runs(store_, "show", "dead");
  ASSERT_EQ(dead.exit_code, 0) << dead.output;
  EXPECT_EQ(lines_of(dead.output)[1],
            "  status:    lost (recorded as running; no heartbeat since " + utc_text(heartbeat) + ")")
      << dead.output;
}

TEST_F(RunsCli, ListJsonHasTheSameFields) {
  write_finished_runs(store_);
  const CommandResult r = kiln_runs(store_, "list", "--json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json runs = json::parse(r.output);
  ASSERT_EQ(runs.size(), 2u);
  const json& base = runs[1];
  EXPECT_EQ(base["name"], "baseline");
  EXPECT_EQ(base["id"], 1);
  EXPECT_EQ(base["status"], "completed");
  EXPECT_EQ(base["tags"], json({"kjv", "base"}));
  EXPECT_EQ(base["layout"], "tp1.pp1.dp2");
  EXPECT_EQ(base["backend"], "cpu");
  EXPECT_EQ(base["device"], "Test CPU");
  EXPECT_EQ(base["last_step"], 20);
  EXPECT_EQ(base["steps"], 100);
  EXPECT_DOUBLE_EQ(base["loss"].get<double>(), 2.6);
  EXPECT_DOUBLE_EQ(base["tokens_per_s"].get<double>(), 1000);
  EXPECT_DOUBLE_EQ(base["mfu"].get<double>(), 0.3);
  EXPECT_DOUBLE_EQ(base["started_at"].get<double>(), kBaselineStart);
  EXPECT_DOUBLE_EQ(base["duration_s"].get<double>(), 300);
  EXPECT_EQ(runs[0]["name"], "lr-high");
  EXPECT_EQ(runs[0]["error"], "loss is NaN at step 15");
  EXPECT_FALSE(runs[0].contains("config"));
}

std::vector<std::string> listed_names(const std::string& store, const std::string& args) {
  const CommandResult r = kiln_runs(store, "list", "--json " + args);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> names;
  if (r.exit_code != 0) return names;
  for (const auto& run : json::parse(r.output)) names.push_back(run["name"]);
  return names;
}

TEST_F(RunsCli, ListFiltersByStatusTagNameSinceAndLimit) {
  write_finished_runs(store_);
  write_dead_run(store_);
  const auto live = start_live_run(store_);
  const double ten_minutes_ago = store::unix_now() - 600;
  set_times(store_, "live", ten_minutes_ago, ten_minutes_ago, std::nullopt);

  using Names = std::vector<std::string>;
  EXPECT_EQ(listed_names(store_, ""), (Names{"live", "dead", "lr-high", "baseline"}));
  EXPECT_EQ(listed_names(store_, "--status failed"), Names{"lr-high"});
  EXPECT_EQ(listed_names(store_, "--status lost"), Names{"dead"});
  EXPECT_EQ(listed_names(store_, "--status running"), Names{"live"});
  EXPECT_EQ(listed_names(store_, "--tag kjv"), Names{"baseline"});
  EXPECT_EQ(listed_names(store_, "--name LR-"), Names{"lr-high"});
  EXPECT_EQ(listed_names(store_, "--since 2024-11-21"), (Names{"live", "dead", "lr-high"}));
  EXPECT_EQ(listed_names(store_, "--since 2024-11-21T09:31"), (Names{"live", "dead"}));
  EXPECT_EQ(listed_names(store_, "--since '2024-11-21 09:29:59'"), (Names{"live", "dead", "lr-high"}));
  EXPECT_EQ(listed_names(store_, "--since 1h"), Names{"live"});
  EXPECT_EQ(listed_names(store_, "--since 3h"), (Names{"live", "dead"}));
  EXPECT_EQ(listed_names(store_, "--limit 2"), (Names{"live", "dead"}));
  EXPECT_EQ(listed_names(store_, "--status completed --tag nope"), Names{});
  EXPECT_EQ(listed_names(store_, "--where train.lr=3e-3"), Names{"lr-high"});
  EXPECT_EQ(listed_names(store_, "--where model.arch=gpt2 --where train.lr=0.001"), (Names{"live", "baseline"}));

  const CommandResult none = kiln_runs(store_, "list", "--tag nope");
  EXPECT_EQ(none.exit_code, 0);
  EXPECT_EQ(none.output, "no runs in " + store_ + " match the filters\n");
}

TEST_F(RunsCli, ListRefusesBadFiltersInOneLine) {
  write_finished_runs(store_);
  for (const std::string since : {"yesterday", "2024-02-30", "2024-11-21T25:00", "3x", "-2h"}) {
    const CommandResult r = kiln_runs(store_, "list", "--since " + since);
    EXPECT_EQ(r.exit_code, 1) << since;
    EXPECT_TRUE(is_one_line(r.output)) << r.output;
    EXPECT_NE(r.output.find("--since '" + since + "' is not a date"), std::string::npos)
        << r.output;
  }
  const CommandResult status = kiln_runs(store_, "list", "--status finished");
  EXPECT_EQ(status.exit_code, 1);
  EXPECT_TRUE(is_one_line(status.output)) << status.output;
  EXPECT_NE(status.output.find("unknown run status 'finished'"), std::string::npos)
      << status.output;
  const CommandResult where = kiln_runs(store_, "list", "--where train.lr");
  EXPECT_EQ(where.exit_code, 1);
  EXPECT_EQ(where.output,
            "kiln: error: runs: 'train.lr' is not KEY=VALUE with a dotted config key (e.g. train.lr=0.001)\n");
  const CommandResult limit = kiln_runs(store_, "list", "--limit -1");
  EXPECT_EQ(limit.exit_code, 1);
  EXPECT_EQ(limit.output, "kiln: error: --limit must be 0 (all) or more, got -1\n");
}

TEST_F(RunsCli, EmptyStoreIsAFriendlyLine) {
  { store::RunWriter writer(store_); }  // creates the store, records no run
  const CommandResult r = kiln_runs(store_, "list");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "no runs in " + store_ + " yet; `kiln train` records one\n");
  const CommandResult j = kiln_runs(store_, "list", "--json");
  EXPECT_EQ(j.exit_code, 0) << j.output;
  EXPECT_EQ(json::parse(j.output), json::array());
}

// ---- the store file ----

TEST_F(RunsCli, MissingStoreIsOneLineAndCreatesNothing) {
  const std::string missing = dir_ + "/missing.db";
  for (const std::string command :
       {"list", "show baseline", "compare a b", "export a --format csv", "tag a x", "note a x",
        "rm a", "pause a", "set a train.lr=1e-4"}) {
    const CommandResult r = run_command(kiln + " runs " + command + " --store " + missing);
    EXPECT_EQ(r.exit_code, 1) << command;
    EXPECT_EQ(r.output, "kiln: error: store: no store at " + missing +
                            " (give --store PATH or set KILN_STORE; `kiln train` creates the "
                            "store)\n")
        << command;
  }
  EXPECT_EQ(std::vector<fs::path>(fs::directory_iterator(dir_), fs::directory_iterator()),
            std::vector<fs::path>{});
}

TEST_F(RunsCli, StoreComesFromTheFlagThenKilnStoreThenTheCurrentFolder) {
  write_finished_runs(store_);
  const CommandResult env =
      run_command("cd " + dir_ + " && KILN_STORE=" + store_ + " " + kiln + " runs list --json");
  ASSERT_EQ(env.exit_code, 0) << env.output;
  EXPECT_EQ(json::parse(env.output).size(), 2u);

  const CommandResult flag = run_command("KILN_STORE=/nonexistent.db " + kiln +
                                         " runs list --json --store " + store_);
  ASSERT_EQ(flag.exit_code, 0) << flag.output;
  EXPECT_EQ(json::parse(flag.output).size(), 2u);

  fs::rename(store_, dir_ + "/kiln-runs.db");
  const CommandResult here = run_command("cd " + dir_ + " && env -u KILN_STORE " + kiln +
                                         " runs list --json");
  ASSERT_EQ(here.exit_code, 0) << here.output;
  EXPECT_EQ(json::parse(here.output).size(), 2u);
}

TEST_F(RunsCli, FileThatIsNotAStoreIsRefusedAndLeftUnchanged) {
  const std::string text = dir_ + "/notes.txt";
  std::ofstream(text) << "these are not the runs you are looking for\n";
  // A SQLite file of another program, in rollback-journal mode: opening it for writing would
  // switch it to WAL mode, so this proves edits check the file before touching it.
  const std::string foreign = dir_ + "/foreign.db";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(foreign.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE orders (id INTEGER); INSERT INTO orders VALUES (1);",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);

  for (const auto& [path, why] : {std::pair{text, "(file is not a database)"},
                                  std::pair{foreign, "(it holds other tables: orders)"}}) {
    const std::string before = file_bytes(path);
    for (const std::string command :
         {"list", "show a", "tag a x", "note a x", "rm a --force", "pause a"}) {
      const CommandResult r = run_command(kiln + " runs " + command + " --store " + path);
      EXPECT_EQ(r.exit_code, 1) << command;
      EXPECT_EQ(r.output, "kiln: error: store: " + path + " is not a kiln run store " + why + "\n")
          << command;
    }
    EXPECT_TRUE(file_bytes(path) == before) << path << " was changed";
  }
  EXPECT_FALSE(fs::exists(foreign + "-wal"));
  EXPECT_FALSE(fs::exists(foreign + "-shm"));
}

// ---- show ----

TEST_F(RunsCli, ShowPrintsRecordConfigMetricsEventsAndCheckpoints) {
  write_finished_runs(store_);
  const CommandResult r = kiln_runs(store_, "show", "base --events 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto lines = lines_of(r.output);
  EXPECT_EQ(lines[0], "run 1: baseline");
  EXPECT_EQ(lines[1], "  status:    completed");
  EXPECT_EQ(lines[2], "  machine:   cpu (Test CPU) on h1, layout tp1.pp1.dp2");
  EXPECT_EQ(lines[3], "  command:   kiln train --set train.lr=0.001000");
  EXPECT_EQ(lines[4],
            "  times:     created 2024-11-20 14:00:00, started 2024-11-20 14:00:00, ended "
            "2024-11-20 14:05:00, ran 5m00s");
  EXPECT_EQ(lines[5], "  tags:      kjv, base");
  EXPECT_EQ(lines[6],
            "  config:    gpt2, 2 layers, d_model 64, 2 heads, seq_len 32, vocab 257; 100 steps, "
            "batch 8 (micro 4), lr 0.001");
  EXPECT_NE(r.output.find("\nlatest metrics (step 20):\n"), std::string::npos) << r.output;
  EXPECT_EQ(row_with(r.output, 0, "0"),
            (std::vector<std::string>{"0", "2.5000", "0.001", "0.5000", "1.0k", "10.0", "40.0%",
                                      "1.0 MiB", "2.0 MiB"}));
  EXPECT_EQ(row_with(r.output, 0, "1")[1], "2.7000");
  EXPECT_NE(r.output.find("\nlatest validation loss: 2.9000 at step 20\n"), std::string::npos);

  // --events 2: the two newest (the trainer's note, then the end), oldest first.
  const size_t events = r.output.find("events (latest 2):");
  ASSERT_NE(events, std::string::npos) << r.output;
  const auto event_lines = lines_of(r.output.substr(events));
  ASSERT_GE(event_lines.size(), 4u);
  EXPECT_EQ(cells(event_lines[1])[0], "TIME");
  EXPECT_EQ(cells(event_lines[2])[2], "status");
  EXPECT_EQ(cells(event_lines[2])[3], "a note from the trainer");
  EXPECT_EQ(cells(event_lines[3])[2], "end");
  EXPECT_EQ(event_lines[4], "");

  const auto checkpoint = row_with(r.output, 4, "/ckpt/baseline-20");
  ASSERT_EQ(checkpoint.size(), 5u) << r.output;
  EXPECT_EQ(checkpoint[0], "20");
  EXPECT_EQ(checkpoint[1], "1.0 MiB");
  EXPECT_EQ(checkpoint[2], "tp1.pp1.dp2");
  EXPECT_EQ(checkpoint[3], "2024-11-20 14:02:05");
}

// A step of more than 8 ranks shows rank 0's row and how many ranks logged it; --json adds
// the step's spread across ranks.
TEST_F(RunsCli, ShowOfAWideStepIsRankZeroAndTheRankCount) {
  {
    store::RunWriter writer(store_);
    writer.create_run(info("wide", 0.001));
    std::vector<store::MetricRow> rows;
    for (int rank = 0; rank < 12; ++rank) {
      rows.push_back(metric(10, rank, kBaselineStart + 60, 3.1, 900, 10, 0.35));
      rows.back().fwd_ms = rank == 7 ? 40 : 10;
    }
    writer.log_metrics(rows);
    writer.finish(RunStatus::Completed);
    writer.flush();
  }
  const CommandResult r = kiln_runs(store_, "show", "wide");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(row_with(r.output, 0, "0")[1], "3.1000") << r.output;
  EXPECT_TRUE(row_with(r.output, 0, "1").empty()) << r.output;
  EXPECT_NE(r.output.find("rank 0 of the 12 ranks that logged the step"), std::string::npos) << r.output;
  const json run = json::parse(kiln_runs(store_, "show", "wide --json").output);
  ASSERT_EQ(run["latest_metrics"].size(), 1u);
  EXPECT_EQ(run["latest_ranks"], 12);
  EXPECT_EQ(run["latest_spread"]["fwd_ms"]["slowest_rank"], json({7}));
}

// A learning rate mid-schedule has every digit of a double; the table shows three.
TEST_F(RunsCli, ShowPrintsTheLearningRateInThreeDigits) {
  {
    store::RunWriter writer(store_);
    writer.create_run(info("mid-schedule", 0.001));
    auto row = metric(10, 0, kBaselineStart + 60, 3.1, 900, 10, 0.35);
    row.lr = 2.0 / 7000;
    writer.log_metrics({row});
    writer.finish(RunStatus::Completed);
    writer.flush();
  }
  const CommandResult r = kiln_runs(store_, "show", "mid-schedule");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(row_with(r.output, 0, "0")[2], "0.000286") << r.output;
}

TEST_F(RunsCli, ShowNamesTheErrorOfAFailedRun) {
  write_finished_runs(store_);
  const CommandResult r = kiln_runs(store_, "show", "2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\n  status:    failed\n  error:     loss is NaN at step 15\n"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("latest validation loss"), std::string::npos) << r.output;
}

TEST_F(RunsCli, ShowJsonHasTheFullConfig) {
  write_finished_runs(store_);
  const CommandResult r = kiln_runs(store_, "show", "baseline --json --events 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json run = json::parse(r.output);
  EXPECT_EQ(run["name"], "baseline");
  EXPECT_EQ(run["config"], json::parse(config(0.001)));
  ASSERT_EQ(run["latest_metrics"].size(), 2u);
  EXPECT_EQ(run["latest_metrics"][1]["rank"], 1);
  EXPECT_DOUBLE_EQ(run["latest_metrics"][1]["loss"].get<double>(), 2.7);
  EXPECT_DOUBLE_EQ(run["latest_valid"]["loss"].get<double>(), 2.9);
  ASSERT_EQ(run["events"].size(), 1u);
  EXPECT_EQ(run["events"][0]["kind"], "end");
  ASSERT_EQ(run["checkpoints"].size(), 1u);
  EXPECT_EQ(run["checkpoints"][0]["bytes"], 1 << 20);
  EXPECT_EQ(run["commands"], json::array());
}

// A mixture-of-experts run: two MoE layers at steps 10 and 20, layer 2 lopsided at step 20.
void write_moe_run(const std::string& path) {
  store::RunWriter writer(path);
  writer.create_run(info("moe", 0.001));
  writer.log_metrics({metric(10, 0, kBaselineStart + 60, 3.1, 900, 10, 0.35)});
  const auto load = [](int64_t step, int layer, std::vector<int64_t> tokens, double aux) {
    store::ExpertLoad l;
    l.step = step;
    l.layer = layer;
    l.tokens = std::move(tokens);
    l.aux_loss = aux;
    return l;
  };
  writer.log_expert_loads({load(10, 0, {25, 25, 25, 25}, 0.01), load(10, 2, {30, 25, 25, 20}, 0.011)});
  writer.log_expert_loads({load(20, 0, {25, 25, 25, 25}, 0.01), load(20, 2, {100, 20, 20, 20}, 0.03)});
  writer.finish(RunStatus::Completed);
  writer.flush();
}

TEST_F(RunsCli, ShowSummarisesTheLatestRoutingOfAMixtureOfExperts) {
  write_moe_run(store_);
  const CommandResult r = kiln_runs(store_, "show", "moe");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Layer 2: 100 of 160 tokens on one of 4 experts, 2.5 times the mean.
  EXPECT_NE(r.output.find("\nexperts: worst imbalance 2.50 at layer 2 (2 MoE layers, step 20), aux loss 0.02 "
                          "(mean of the layers)\n"),
            std::string::npos)
      << r.output;
  const json run = json::parse(kiln_runs(store_, "show", "moe --json").output);
  ASSERT_EQ(run["latest_experts"].size(), 2u);
  EXPECT_EQ(run["latest_experts"][1]["tokens"], json({100, 20, 20, 20}));
  EXPECT_DOUBLE_EQ(run["latest_experts"][1]["imbalance"].get<double>(), 2.5);

  write_finished_runs(store_);
  EXPECT_EQ(kiln_runs(store_, "show", "baseline").output.find("experts:"), std::string::npos) << "a dense run";
}

TEST_F(RunsCli, ExportCarriesTheExpertLoads) {
  write_moe_run(store_);
  const CommandResult csv = kiln_runs(store_, "export", "moe --format experts-csv");
  ASSERT_EQ(csv.exit_code, 0) << csv.output;
  const auto lines = lines_of(csv.output);
  ASSERT_EQ(lines.size(), 1u + 2 * 2 * 4) << csv.output;
  EXPECT_EQ(lines[0], store::kExpertsCsvHeader);
  EXPECT_EQ(lines[1], "moe,10,0,0,25,0,0.01,,1");
  EXPECT_EQ(lines[13], "moe,20,2,0,100,0,0.03,,2.5");
  EXPECT_EQ(lines[16], "moe,20,2,3,20,0,0.03,,2.5");

  const json run = json::parse(kiln_runs(store_, "export", "moe --format json").output);
  ASSERT_EQ(run["experts"].size(), 4u);
  EXPECT_EQ(run["experts"][3]["step"], 20);
  EXPECT_EQ(run["experts"][3]["layer"], 2);
  EXPECT_EQ(run["experts"][3]["tokens"], json({100, 20, 20, 20}));
  EXPECT_DOUBLE_EQ(run["experts"][3]["aux_loss"].get<double>(), 0.03);
}

TEST_F(RunsCli, UnknownOrAmbiguousRunListsTheCandidates) {
  write_finished_runs(store_);
  { store::RunWriter(store_).create_run(info("lr-low", 0.0001)); }
  const CommandResult ambiguous = kiln_runs(store_, "show", "lr");
  EXPECT_EQ(ambiguous.exit_code, 1);
  EXPECT_EQ(ambiguous.output,
            "kiln: error: store: run 'lr' is ambiguous: lr-high (id 2), lr-low (id 3); give the "
            "full name or the id\n");
  const CommandResult unknown = kiln_runs(store_, "show", "9");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(unknown.output, "kiln: error: store: no run with id 9 in " + store_ + "\n");
}

// ---- compare ----

TEST_F(RunsCli, CompareTabulatesConfigDifferencesAndSummaries) {
  write_finished_runs(store_);
  { store::RunWriter(store_).create_run(info("empty", 0.001)); }
  const CommandResult r = kiln_runs(store_, "compare", "baseline lr-high empty --target-loss 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto lines = lines_of(r.output);
  EXPECT_EQ(lines[0], "config differences:");
  EXPECT_EQ(cells(lines[1]), (std::vector<std::string>{"KEY", "baseline", "lr-high", "empty"}));
  EXPECT_EQ(cells(lines[2]), (std::vector<std::string>{"train.lr", "0.001", "0.003", "0.001"}));
  EXPECT_EQ(lines[3], "");
  EXPECT_EQ(lines[4], "summary:");
  using Row = std::vector<std::string>;
  EXPECT_EQ(row_with(r.output, 0, "status"), (Row{"status", "completed", "failed", "running"}));
  EXPECT_EQ(row_with(r.output, 0, "steps logged"), (Row{"steps logged", "2", "1", "0"}));
  EXPECT_EQ(row_with(r.output, 0, "final loss"), (Row{"final loss", "2.6000", "3.0000", "-"}));
  EXPECT_EQ(row_with(r.output, 0, "best loss"), (Row{"best loss", "2.6000 @20", "3.0000 @10", "-"}));
  EXPECT_EQ(row_with(r.output, 0, "best valid loss"),
            (Row{"best valid loss", "2.9000", "-", "-"}));
  // Means leave out the first logged step (warm-up), unless it is the only one.
  EXPECT_EQ(row_with(r.output, 0, "mean tokens/s"), (Row{"mean tokens/s", "1.0k", "800", "-"}));
  EXPECT_EQ(row_with(r.output, 0, "mean TFLOP/s"), (Row{"mean TFLOP/s", "15.0", "12.0", "-"}));
  EXPECT_EQ(row_with(r.output, 0, "mean MFU"), (Row{"mean MFU", "30.0%", "30.0%", "-"}));
  EXPECT_EQ(row_with(r.output, 0, "elapsed"), (Row{"elapsed", "2m00s", "30s", "-"}));
  EXPECT_EQ(row_with(r.output, 0, "time to loss 3"),
            (Row{"time to loss 3", "2m00s (step 20)", "30s (step 10)", "not reached"}));
}

TEST_F(RunsCli, CompareJson) {
  write_finished_runs(store_);
  const CommandResult r = kiln_runs(store_, "compare", "1 2 --json --target-loss 2.6");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json out = json::parse(r.output);
  EXPECT_EQ(out["runs"][1]["name"], "lr-high");
  ASSERT_EQ(out["config_diff"].size(), 1u);
  EXPECT_EQ(out["config_diff"][0]["key"], "train.lr");
  EXPECT_EQ(out["config_diff"][0]["values"], json({0.001, 0.003}));
  const json& base = out["summary"][0];
  EXPECT_EQ(base["logged_steps"], 2);
  EXPECT_DOUBLE_EQ(base["best_loss"].get<double>(), 2.6);
  EXPECT_EQ(base["best_step"], 20);
  EXPECT_EQ(base["target_step"], 20);
  EXPECT_DOUBLE_EQ(base["time_to_target_s"].get<double>(), 120);
  EXPECT_DOUBLE_EQ(base["elapsed_s"].get<double>(), 120);
  EXPECT_TRUE(out["summary"][1]["target_step"].is_null());
}

TEST_F(RunsCli, CompareNeedsTwoDistinctRuns) {
  write_finished_runs(store_);
  const CommandResult one = kiln_runs(store_, "compare", "baseline");
  EXPECT_EQ(one.exit_code, 1);
  EXPECT_EQ(one.output, "kiln: error: compare needs at least two runs (got 1)\n");
  const CommandResult same = kiln_runs(store_, "compare", "baseline 1");
  EXPECT_EQ(same.exit_code, 1);
  EXPECT_EQ(same.output,
            "kiln: error: compare: 'baseline' and '1' are the same run (id 1); give distinct "
            "runs\n");
}

// ---- export ----

TEST_F(RunsCli, ExportCsvToStdoutAndToAFile) {
  write_finished_runs(store_);
  const CommandResult r = kiln_runs(store_, "export", "baseline --format csv");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto lines = lines_of(r.output);
  ASSERT_EQ(lines.size(), 5u) << r.output;
  EXPECT_EQ(lines[0], store::metrics_csv_header());
  EXPECT_EQ(lines[1], "baseline,10,0,1732111260,2560,3.1,0.001,0.5,900,10,0.35,1048576,2097152,,,,,,,0,,,,,,,,");
  EXPECT_EQ(lines[4], "baseline,20,1,1732111320,5120,2.7,0.001,0.5,1000,20,0.2,1048576,2097152,,,,,,,0,,,,,,,,");

  const std::string file = dir_ + "/baseline.csv";
  const CommandResult to_file = kiln_runs(store_, "export", "baseline --format csv -o " + file);
  ASSERT_EQ(to_file.exit_code, 0) << to_file.output;
  EXPECT_EQ(to_file.output, "");
  EXPECT_EQ(file_bytes(file), r.output);
  EXPECT_FALSE(fs::exists(file + ".tmp"));
  EXPECT_EQ(kiln_runs(store_, "export", "baseline").output, r.output) << "CSV is the default";
}

TEST_F(RunsCli, ExportJsonHoldsTheWholeRun) {
  write_finished_runs(store_);
  const std::string file = dir_ + "/run.json";
  const CommandResult r = kiln_runs(store_, "export", "lr-high --format json --output " + file);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json run = json::parse(file_bytes(file));
  EXPECT_EQ(run["run"]["name"], "lr-high");
  EXPECT_EQ(run["run"]["error"], "loss is NaN at step 15");
  ASSERT_EQ(run["metrics"].size(), 1u);
  EXPECT_DOUBLE_EQ(run["metrics"][0]["loss"].get<double>(), 3.0);
}

TEST_F(RunsCli, ExportRefusesBadFormatsAndPathsWithoutLeavingFiles) {
  write_finished_runs(store_);
  const std::string file = dir_ + "/out.xml";
  const CommandResult format = kiln_runs(store_, "export", "baseline --format xml -o " + file);
  EXPECT_EQ(format.exit_code, 1);
  EXPECT_EQ(format.output, "kiln: error: export: unknown --format 'xml' (csv, jsonl, json or experts-csv)\n");
  EXPECT_FALSE(fs::exists(file));

  const std::string nowhere = dir_ + "/no/such/folder/out.csv";
  const CommandResult path = kiln_runs(store_, "export", "baseline --format csv -o " + nowhere);
  EXPECT_EQ(path.exit_code, 1);
  EXPECT_TRUE(is_one_line(path.output)) << path.output;
  EXPECT_NE(path.output.find("cannot write " + nowhere + ".tmp"), std::string::npos);

  const std::string unknown = dir_ + "/unknown.csv";
  const CommandResult run = kiln_runs(store_, "export", "nosuchrun --format csv -o " + unknown);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_TRUE(is_one_line(run.output)) << run.output;
  EXPECT_FALSE(fs::exists(unknown));
  EXPECT_FALSE(fs::exists(unknown + ".tmp"));
}

// ---- tag, note, rm ----

TEST_F(RunsCli, TagAndNoteEditTheRecord) {
  write_finished_runs(store_);
  const CommandResult add = kiln_runs(store_, "tag", "baseline good kjv best");
  ASSERT_EQ(add.exit_code, 0) << add.output;
  EXPECT_EQ(add.output, "run 1 (baseline) tags: kjv, base, good, best\n");
  const CommandResult remove = kiln_runs(store_, "tag", "baseline kjv base --remove");
  ASSERT_EQ(remove.exit_code, 0) << remove.output;
  EXPECT_EQ(remove.output, "run 1 (baseline) tags: good, best\n");
  EXPECT_EQ(listed_names(store_, "--tag best"), std::vector<std::string>{"baseline"});

  const CommandResult note = kiln_runs(store_, "note", "lr-high 'diverged: lr too high'");
  ASSERT_EQ(note.exit_code, 0) << note.output;
  EXPECT_EQ(note.output, "run 2 (lr-high) notes set\n");
  const CommandResult show = kiln_runs(store_, "show", "lr-high --json");
  EXPECT_EQ(json::parse(show.output)["notes"], "diverged: lr too high");
  EXPECT_NE(kiln_runs(store_, "show", "lr-high").output.find("\n  notes:     diverged: lr too high\n"),
            std::string::npos);
}

TEST_F(RunsCli, EditsOfUnknownRunsChangeNothing) {
  write_finished_runs(store_);
  const std::string before = file_bytes(store_);
  for (const std::string command :
       {"tag nosuch x", "tag baseline ''", "note nosuch text", "rm baseline nosuch", "rm 42"}) {
    const CommandResult r = kiln_runs(store_, command);
    EXPECT_EQ(r.exit_code, 1) << command;
    EXPECT_TRUE(is_one_line(r.output)) << command << ": " << r.output;
  }
  EXPECT_TRUE(file_bytes(store_) == before) << store_ << " was changed";
  EXPECT_EQ(listed_names(store_, ""), (std::vector<std::string>{"lr-high", "baseline"}));
}

TEST_F(RunsCli, RmDeletesEndedRunsAndLiveOnesOnlyWithForce) {
  write_finished_runs(store_);
  const auto live = start_live_run(store_);
  const CommandResult refused = kiln_runs(store_, "rm", "lr-high live");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_EQ(refused.output,
            "kiln: error: rm: run 3 (live) is running; stop it first (kiln runs stop 3), or "
            "remove it anyway with --force\n");
  EXPECT_EQ(listed_names(store_, ""), (std::vector<std::string>{"live", "lr-high", "baseline"}));

  const CommandResult removed = kiln_runs(store_, "rm", "lr-high 2");
  ASSERT_EQ(removed.exit_code, 0) << removed.output;
  EXPECT_EQ(removed.output, "removed run 2 (lr-high)\n");
  const CommandResult forced = kiln_runs(store_, "rm", "live --force");
  ASSERT_EQ(forced.exit_code, 0) << forced.output;
  EXPECT_EQ(forced.output, "removed run 3 (live)\n");
  EXPECT_EQ(listed_names(store_, ""), std::vector<std::string>{"baseline"});
}

// ---- steering ----

TEST_F(RunsCli, SteeringQueuesCommandsForALiveRun) {
  write_finished_runs(store_);
  const auto live = start_live_run(store_);
  const CommandResult pause = kiln_runs(store_, "pause", "live");
  ASSERT_EQ(pause.exit_code, 0) << pause.output;
  EXPECT_EQ(pause.output,
            "queued pause for run 3 (live) as command 1; it applies at the next step boundary\n");
  const CommandResult set = kiln_runs(store_, "set", "3 'train.lr = 3e-4'");
  ASSERT_EQ(set.exit_code, 0) << set.output;
  EXPECT_EQ(set.output,
            "queued set train.lr=0.0003 for run 3 (live) as command 2; it applies at the next "
            "step boundary\n");
  for (const std::string action : {"resume", "stop", "checkpoint"})
    EXPECT_EQ(kiln_runs(store_, action, "live").exit_code, 0) << action;

  const auto pending = live->pending_commands();
  ASSERT_EQ(pending.size(), 5u);
  EXPECT_EQ(pending[0].action, store::CommandAction::Pause);
  EXPECT_EQ(pending[0].argument, "");
  EXPECT_EQ(pending[1].action, store::CommandAction::Set);
  EXPECT_EQ(pending[1].argument, "train.lr=0.0003");
  EXPECT_EQ(pending[2].action, store::CommandAction::Resume);
  EXPECT_EQ(pending[3].action, store::CommandAction::Stop);
  EXPECT_EQ(pending[4].action, store::CommandAction::Checkpoint);
}

TEST_F(RunsCli, SteeringRefusesBadSettingsAndEndedRuns) {
  write_finished_runs(store_);
  const auto live = start_live_run(store_);
  const CommandResult key = kiln_runs(store_, "set", "live model.n_layer=3");
  EXPECT_EQ(key.exit_code, 1);
  EXPECT_EQ(key.output,
            "kiln: error: model.n_layer cannot change during a run; the keys that can are "
            "train.lr, train.lr_scale, train.log_interval, train.eval_interval\n");
  const CommandResult value = kiln_runs(store_, "set", "live train.lr=-1");
  EXPECT_EQ(value.exit_code, 1);
  EXPECT_EQ(value.output, "kiln: error: train.lr: must be greater than 0, got -1\n");
  const CommandResult ended = kiln_runs(store_, "pause", "baseline");
  EXPECT_EQ(ended.exit_code, 1);
  EXPECT_EQ(ended.output,
            "kiln: error: store: run 'baseline' is completed; commands only reach a running or "
            "paused run\n");
  const CommandResult wait = kiln_runs(store_, "pause", "live --wait=soon");
  EXPECT_EQ(wait.exit_code, 1);
  EXPECT_EQ(wait.output,
            "kiln: error: --wait: 'soon' is not a number of seconds greater than 0\n");
  EXPECT_TRUE(live->pending_commands().empty());
}

TEST_F(RunsCli, WaitReportsTheStepItWasAppliedAt) {
  const auto live = start_live_run(store_);
  std::thread trainer = answer_next_command(*live, store::CommandStatus::Applied, 42,
                                             "checkpoint; wrote /ckpt/live/step-00000042");
  const CommandResult r = kiln_runs(store_, "checkpoint", "live --wait 10");
  trainer.join();
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output,
            "queued checkpoint for run 1 (live) as command 1; it applies at the next step "
            "boundary\napplied at step 42: checkpoint; wrote /ckpt/live/step-00000042\n");
  const auto command = row_with(kiln_runs(store_, "show", "live").output, 0, "1");
  ASSERT_EQ(command.size(), 6u);
  EXPECT_EQ(command[2], "checkpoint");
  EXPECT_EQ(command[3], "applied");
  EXPECT_EQ(command[4], "42");
}

TEST_F(RunsCli, WaitReportsARejectionWithExitOne) {
  const auto live = start_live_run(store_);
  std::thread trainer =
      answer_next_command(*live, store::CommandStatus::Rejected, 7, "the run is not paused");
  const CommandResult r = kiln_runs(store_, "resume", "live --wait");
  trainer.join();
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("\nrejected: the run is not paused\n"), std::string::npos) << r.output;
}

TEST_F(RunsCli, WaitTimesOutWithExitTwo) {
  const auto live = start_live_run(store_);
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r = kiln_runs(store_, "set", "live train.log_interval=5 --wait 0.3");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("\nkiln: command 1 still pending after 0.3 s; it stays queued for the "
                          "run's next step boundary\n"),
            std::string::npos)
      << r.output;
  EXPECT_GE(seconds, 0.3);
  EXPECT_LT(seconds, 5.0);
  ASSERT_EQ(live->pending_commands().size(), 1u);
  EXPECT_EQ(live->pending_commands()[0].argument, "train.log_interval=5");
}

TEST_F(RunsCli, WaitStopsWhenTheRunEndsFirst) {
  const auto live = start_live_run(store_);
  std::thread trainer([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (live->pending_commands().empty() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    live->finish(RunStatus::Completed);
    live->flush();
  });
  const CommandResult r = kiln_runs(store_, "pause", "live --wait 20");
  trainer.join();
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("\nkiln: run 1 is completed; command 1 was never applied\n"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace kiln::test
