#include "store/run_writer.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <thread>

#include "base/check.h"
#include "store/commands.h"
#include "store/json_rows.h"
#include "store/metric_queries.h"
#include "store/run_launch.h"
#include "store/run_queries.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::error_of;

using testing_util::interval;
using testing_util::loss_of;
using testing_util::run_info;
using testing_util::StoreTest;

class RunWriterTest : public StoreTest {};

// A resume of the run by its name (kiln runs resume, --name): that run going on.
ResumeRequest named_resume(const std::string& checkpoint, bool force = false) {
  ResumeRequest request;
  request.checkpoint = checkpoint;
  request.named = true;
  request.force = force;
  return request;
}

std::vector<MetricRow> all_rows(Database& db, int64_t run) {
  std::vector<MetricRow> rows;
  for_each_metric(db, run, [&](const MetricRow& r) { rows.push_back(r); });
  return rows;
}

TEST_F(RunWriterTest, RecordsARunFromStartToEnd) {
  int64_t id = 0;
  {
    RunWriter writer(path());
    id = writer.create_run(run_info("gpt2-small"));
    EXPECT_EQ(writer.run_id(), id);
    for (int64_t step = 10; step <= 30; step += 10) writer.log_metrics(interval(step, 4));
    writer.log_valid({30, 0, 3.25});
    SystemRow sys;
    sys.rank = 1;
    sys.gpu_util = 97.5;
    sys.rss_bytes = 123456789;
    writer.log_system({sys});
    writer.log_event(event_kind::kNan, "loss is NaN on rank 2", 20);
    writer.log_checkpoint({30, "/ckpt/step-30", 4096, "tp1.pp1.dp4", 0, 1.5});
    writer.finish(RunStatus::Completed);
    writer.flush();
    EXPECT_EQ(writer.stats().committed_metric_rows, 12);
    EXPECT_EQ(writer.stats().dropped_rows, 0);
    EXPECT_EQ(writer.stats().failed_commits, 0);
  }
  auto db = open_store(path(), Access::ReadOnly);
  const RunRecord run = get_run(*db, id);
  EXPECT_EQ(run.name, "gpt2-small");
  EXPECT_EQ(run.status, RunStatus::Completed);
  EXPECT_EQ(run.layout, "tp1.pp1.dp1");
  EXPECT_EQ(run.host, "testhost");
  EXPECT_EQ(run.command_line, "kiln train --name gpt2-small");
  EXPECT_EQ(run.config_json, run_info("x").config_json);
  ASSERT_TRUE(run.started_at && run.ended_at && run.heartbeat_at);
  EXPECT_LE(*run.started_at, *run.ended_at);
  EXPECT_EQ(run.last_step, 30);
  EXPECT_EQ(run.error, "");

  const auto rows = all_rows(*db, id);
  ASSERT_EQ(rows.size(), 12u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t step = 10 * (1 + static_cast<int64_t>(i) / 4);
    const int rank = static_cast<int>(i % 4);
    EXPECT_EQ(rows[i].step, step);
    EXPECT_EQ(rows[i].rank, rank);
    EXPECT_EQ(rows[i].loss, loss_of(step, rank));
    EXPECT_EQ(rows[i].tokens, step * 4096);
    EXPECT_EQ(rows[i].time, 1.7e9 + static_cast<double>(step));
    EXPECT_EQ(rows[i].mem_used, int64_t{1} << 30);
    EXPECT_FALSE(rows[i].mem_peak.has_value());
    EXPECT_TRUE(std::isnan(rows[i].tflops));  // not measured: NULL
  }

  const auto valid = list_valid(*db, id);
  ASSERT_EQ(valid.size(), 1u);
  EXPECT_EQ(valid[0].step, 30);
  EXPECT_EQ(valid[0].loss, 3.25);
  EXPECT_GT(valid[0].time, 1.6e9);  // stamped when queued

  const auto system = list_system(*db, id);
  ASSERT_EQ(system.size(), 1u);
  EXPECT_EQ(system[0].rank, 1);
  EXPECT_EQ(system[0].gpu_util, 97.5);
  EXPECT_EQ(system[0].rss_bytes, 123456789);
  EXPECT_TRUE(std::isnan(system[0].gpu_power_w));

  const auto checkpoints = list_checkpoints(*db, id);
  ASSERT_EQ(checkpoints.size(), 1u);
  EXPECT_EQ(checkpoints[0].path, "/ckpt/step-30");
  EXPECT_EQ(checkpoints[0].bytes, 4096);
  EXPECT_EQ(checkpoints[0].layout, "tp1.pp1.dp4");
  EXPECT_EQ(checkpoints[0].seconds, 1.5);

  const auto events = list_events(*db, id);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].kind, "start");
  EXPECT_EQ(events[0].message, "started on testhost, cpu (test cpu), layout tp1.pp1.dp1");
  EXPECT_EQ(events[1].kind, "nan");
  EXPECT_EQ(events[1].step, 20);
  EXPECT_EQ(events[1].message, "loss is NaN on rank 2");
  EXPECT_EQ(events[2].kind, "checkpoint");
  EXPECT_EQ(events[2].message, "wrote /ckpt/step-30 (4096 bytes)");
  EXPECT_EQ(events[3].kind, "end");
  EXPECT_EQ(events[3].message, "completed");
}

TEST_F(RunWriterTest, AResumedRunContinuesTheSameRecord) {
  int64_t id = 0;
  {
    RunWriter writer(path());
    id = writer.create_run(run_info("long-run"));
    writer.log_metrics(interval(10, 2));
    writer.finish(RunStatus::Failed, "out of memory");
    writer.flush();
  }
  {
    RunWriter writer(path());
    RunInfo info = run_info("long-run");
    info.host = "otherhost";
    info.command_line = "kiln train --resume latest";
    EXPECT_EQ(writer.resume_run(info, named_resume("/ckpt/step-00000010")).run_id, id);
    writer.log_metrics(interval(20, 2));
    writer.flush();
    auto db = open_store(path(), Access::ReadOnly);
    const RunRecord run = get_run(*db, id);
    EXPECT_EQ(run.status, RunStatus::Running);
    EXPECT_FALSE(run.ended_at.has_value());
    EXPECT_EQ(run.error, "");
    EXPECT_EQ(run.host, "otherhost");
    EXPECT_EQ(run.command_line, "kiln train --resume latest");
    EXPECT_EQ(run.last_step, 20);
    EXPECT_EQ(list_events(*db, id).back().message, "resumed from /ckpt/step-00000010 on otherhost");
    // A second process may not record the run while this one does.
    RunWriter second(path());
    EXPECT_EQ(error_of([&] { second.resume_run(info, named_resume("x")).run_id; }),
              "store: run 'long-run' (id 1) is still running in another process (on otherhost, last "
              "heartbeat 0 s ago); stop it first, resume under another --name, or give --force if that "
              "process is gone");
    writer.finish(RunStatus::Completed);
    writer.flush();
  }
  RunWriter writer(path());
  EXPECT_FALSE(writer.resume_run(run_info("never-recorded"), named_resume("x")).run_id.has_value());
  EXPECT_EQ(writer.run_id(), 0);
}

// Goodput's clock: an automatic restart counts the time since the failure, a resume by a user
// only the attempt that ended; the step seconds go back to the checkpoint's.
TEST_F(RunWriterTest, AResumeCarriesGoodputsClockOn) {
  int64_t id = 0;
  const auto attempt_ended = [&](RunWriter& writer) {
    writer.finish(RunStatus::Failed, "rank 1 did not answer");
    writer.flush();
    // An attempt of 10 s that ended 4 s ago.
    auto db = open_store(path(), Access::ReadWrite);
    Statement set(*db, "UPDATE runs SET attempt_started_at = ?, ended_at = ? WHERE id = ?");
    set.bind_all(unix_now() - 14, unix_now() - 4, id).run();
  };
  const auto run = [&] {
    auto db = open_store(path(), Access::ReadOnly);
    return get_run(*db, id);
  };
  {
    RunWriter writer(path());
    id = writer.create_run(run_info("goodput"));
    writer.log_metrics(interval(10, 2), 8.5);
    writer.flush();
    EXPECT_EQ(run().step_seconds, 8.5);
    EXPECT_EQ(run().counted_seconds, 0);
    EXPECT_NEAR(*run().attempt_started_at, unix_now(), 5);
    attempt_ended(writer);
  }
  {
    RunWriter writer(path());
    ResumeRequest restart = named_resume("/ckpt/step-00000005");
    restart.restart = true;
    restart.step_seconds = 4.25;  // steps 6-10 are lost
    writer.resume_run(run_info("goodput"), restart);
    EXPECT_EQ(run().step_seconds, 4.25);
    EXPECT_NEAR(run().counted_seconds, 14, 1);  // the attempt and the 4 s since its failure
    EXPECT_NEAR(*run().attempt_started_at, unix_now(), 5);
    attempt_ended(writer);
  }
  const double before = run().counted_seconds;
  RunWriter writer(path());
  ResumeRequest resume = named_resume("/ckpt/step-00000005");
  resume.step_seconds = 4.25;
  writer.resume_run(run_info("goodput"), resume);
  EXPECT_NEAR(run().counted_seconds, before + 10, 1e-6);  // the attempt alone
}

TEST_F(RunWriterTest, RecordsHowARunWasLaunchedAndTakesTheResumesLaunch) {
  RunLaunch served;
  served.serve = "127.0.0.1:8080";
  served.allowed_hosts = {"dash.example"};
  served.max_connections = 16;
  served.max_subscribers = 128;
  served.token = true;
  int64_t id = 0;
  {
    RunWriter writer(path());
    RunInfo info = run_info("served");
    info.launch = served;
    id = writer.create_run(info);
    writer.finish(RunStatus::Released);
    writer.flush();
  }
  auto db = open_store(path(), Access::ReadOnly);
  EXPECT_EQ(parse_launch(get_run(*db, id).launch_json), served);
  EXPECT_EQ(db->query_text("SELECT launch FROM runs"),
            R"({"allow_hosts":["dash.example"],"max_connections":16,"max_subscribers":128,"serve":"127.0.0.1:8080",)"
            R"("token":true})");
  {
    // Resumed by hand without the dashboard: the record says so, as the command line does.
    RunWriter writer(path());
    RunInfo info = run_info("served");
    info.launch = RunLaunch{};
    EXPECT_EQ(writer.resume_run(info, named_resume("/ckpt/step-1")).run_id, id);
    writer.finish(RunStatus::Completed);
    writer.flush();
  }
  EXPECT_EQ(get_run(*db, id).launch_json, "{}");
  EXPECT_EQ(parse_launch("{}"), RunLaunch{});
  // A run whose writer was not told (an older kiln's, a test's) has no launch record.
  RunWriter writer(path());
  EXPECT_EQ(get_run(*db, writer.create_run(run_info("unknown"))).launch_json, "");
}

TEST_F(RunWriterTest, KeepsTheRunsPlanAndTakesTheResumesNewOne) {
  int64_t id = 0;
  {
    RunWriter writer(path());
    RunInfo info = run_info("planned");
    info.planned_step_s = 0.0123;
    info.planned_memory_bytes = int64_t{66} << 20;
    id = writer.create_run(info);
    writer.finish(RunStatus::Stopped);
    writer.flush();
  }
  {
    auto db = open_store(path(), Access::ReadOnly);
    const RunRecord run = get_run(*db, id);
    EXPECT_DOUBLE_EQ(run.planned_step_s, 0.0123);
    EXPECT_EQ(run.planned_memory_bytes, int64_t{66} << 20);
    const nlohmann::json j = to_json(run);
    EXPECT_DOUBLE_EQ(j.at("planned_step_s").get<double>(), 0.0123);
    EXPECT_EQ(j.at("planned_memory_bytes").get<int64_t>(), int64_t{66} << 20);
  }
  {
    // Resumed on a device the planner does not know, or with a plan that makes no sense:
    // no plan, not the old one and not the nonsense.
    RunWriter writer(path());
    RunInfo info = run_info("planned");
    info.planned_step_s = -1;
    info.planned_memory_bytes = 0;
    EXPECT_EQ(writer.resume_run(info, named_resume("/ckpt/step-1")).run_id, id);
    writer.finish(RunStatus::Completed);
    writer.flush();
  }
  auto db = open_store(path(), Access::ReadOnly);
  const RunRecord run = get_run(*db, id);
  EXPECT_TRUE(std::isnan(run.planned_step_s));
  EXPECT_FALSE(run.planned_memory_bytes.has_value());
  const nlohmann::json j = to_json(run);
  EXPECT_TRUE(j.at("planned_step_s").is_null());
  EXPECT_TRUE(j.at("planned_memory_bytes").is_null());
  EXPECT_EQ(db->query_int("SELECT count(*) FROM runs WHERE planned_step_s IS NULL AND planned_memory_bytes IS NULL"), 1);
}

// Two trainings from one checkpoint must not interleave their steps in one record: a run that
// has ended goes on only from its newest checkpoint with the config it had, or when named.
TEST_F(RunWriterTest, AnotherTrainingFromAnEndedRunsCheckpointIsNotAppendedToIt) {
  int64_t id = 0;
  {
    RunWriter writer(path());
    id = writer.create_run(run_info("tuned"));
    writer.log_checkpoint({10, "/ckpt/tuned/step-00000010", 100, "tp1.pp1.dp1", 0, std::nullopt});
    writer.log_checkpoint({20, "/ckpt/tuned/step-00000020", 100, "tp1.pp1.dp1", 0, std::nullopt});
    writer.finish(RunStatus::Completed);
    writer.flush();
  }
  const auto resume = [&](int64_t step, bool unchanged) {
    ResumeRequest request;
    request.checkpoint = "/ckpt/tuned/step-" + std::to_string(step);
    request.step = step;
    request.unchanged = unchanged;
    return RunWriter(path()).resume_run(run_info("tuned"), request);
  };
  const ResumeOutcome older = resume(10, true);
  EXPECT_FALSE(older.run_id.has_value());
  EXPECT_EQ(older.another_training,
            "run 'tuned' (id 1) has ended (completed) and its newest checkpoint is at step 20, not this one at step 10");
  const ResumeOutcome changed = resume(20, false);
  EXPECT_FALSE(changed.run_id.has_value());
  EXPECT_EQ(changed.another_training, "run 'tuned' (id 1) has ended (completed) and this training changes its config");
  {
    auto db = open_store(path(), Access::ReadOnly);
    EXPECT_EQ(get_run(*db, id).status, RunStatus::Completed) << "refused without a write";
  }
  const ResumeOutcome same = resume(20, true);
  EXPECT_EQ(same.run_id, id);
  EXPECT_EQ(same.another_training, "");
}

// A run killed with -9 keeps its fresh heartbeat for a while; on its own host the store can
// tell its process is gone and lets a resume continue it at once.
TEST_F(RunWriterTest, AResumeContinuesARunWhoseProcessIsGoneOrWhenForced) {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // its pid now names no process
  int64_t id = 0;
  {
    RunWriter killed(path());
    RunInfo info = run_info("killed");
    info.pid = child;
    id = killed.create_run(info);
    killed.flush();
  }  // never finished: the row says running, with a fresh heartbeat
  {
    auto db = open_store(path(), Access::ReadOnly);
    EXPECT_EQ(get_run(*db, id).status, RunStatus::Running);
    EXPECT_EQ(get_run(*db, id).pid, child);
  }
  RunInfo again = run_info("killed");
  again.pid = getpid();
  again.host = "otherhost";
  EXPECT_EQ(error_of([&] { RunWriter(path()).resume_run(again, named_resume("/ckpt/step-5")).run_id; }),
            "store: run 'killed' (id 1) is still running in another process (pid " + std::to_string(child) +
                " on testhost, last heartbeat 0 s ago); stop it first, resume under another --name, or give "
                "--force if that process is gone")
      << "from another host the pid says nothing";
  again.host = "testhost";
  {
    RunWriter writer(path());
    EXPECT_EQ(writer.resume_run(again, named_resume("/ckpt/step-5")).run_id, id);
    auto db = open_store(path(), Access::ReadOnly);
    EXPECT_EQ(get_run(*db, id).pid, getpid());
    const std::string message = list_events(*db, id).back().message;
    EXPECT_EQ(message.substr(0, message.find(" since ")),
              "resumed from /ckpt/step-5 on testhost; the run looked lost");
    EXPECT_NE(message.find("(its pid " + std::to_string(child) + " is gone)"), std::string::npos) << message;
    // This process is alive: a second resume is refused, unless forced.
    EXPECT_NE(error_of([&] { RunWriter(path()).resume_run(again, named_resume("x")).run_id; }), "(no error)");
    RunWriter forced(path());
    EXPECT_EQ(forced.resume_run(again, named_resume("/ckpt/step-5", true)).run_id, id);
    EXPECT_EQ(list_events(*db, id).back().message,
              "resumed from /ckpt/step-5 on testhost; forced while it still looked running");
    forced.finish(RunStatus::Completed);
    forced.flush();
    EXPECT_FALSE(get_run(*db, id).pid.has_value()) << "an ended run has no process";
  }
}

TEST_F(RunWriterTest, NamesTextAndSecretsAreCheckedAtTheDoor) {
  RunWriter writer(path());
  RunInfo info = run_info("../../escape");
  EXPECT_EQ(error_of([&] { writer.create_run(info); }),
            "store: run name '../../escape' starts with a dot; a run name names a folder, so it may not");
  info.name = "tagged";
  info.tags = {"ok", "bad\xff"};
  EXPECT_EQ(error_of([&] { writer.create_run(info); }),
            "store: the tag is not valid UTF-8 (a bad byte at offset 3); save it as UTF-8 text");
  info.tags = {"ok"};
  info.command_line = "kiln train --serve 0.0.0.0:8080 --token s3cret --name tagged";
  const int64_t id = writer.create_run(info);
  auto db = open_store(path(), Access::ReadOnly);
  EXPECT_EQ(get_run(*db, id).command_line, "kiln train --serve 0.0.0.0:8080 --token *** --name tagged");
}

TEST_F(RunWriterTest, AFailedRunKeepsItsError) {
  int64_t id = 0;
  {
    RunWriter writer(path());
    id = writer.create_run(run_info("diverged"));
    writer.set_status(RunStatus::Paused);
    writer.set_status(RunStatus::Running);
    writer.finish(RunStatus::Failed, "loss is NaN at step 12 on every rank");
    writer.flush();
  }
  auto db = open_store(path(), Access::ReadOnly);
  const RunRecord run = get_run(*db, id);
  EXPECT_EQ(run.status, RunStatus::Failed);
  EXPECT_EQ(run.error, "loss is NaN at step 12 on every rank");
  const auto events = list_events(*db, id);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[1].kind + " " + events[1].message, "status paused");
  EXPECT_EQ(events[2].kind + " " + events[2].message, "status running");
  EXPECT_EQ(events[3].kind + " " + events[3].message,
            "end failed: loss is NaN at step 12 on every rank");
}

TEST_F(RunWriterTest, RefusesMisuseWithClearMessages) {
  RunWriter first(path());
  EXPECT_EQ(error_of([&] { first.log_metrics(interval(0, 1)); }),
            "store: log before create_run: the writer has no run yet");
  EXPECT_EQ(error_of([&] { first.create_run(run_info("")); }), "store: a run needs a name");
  EXPECT_EQ(error_of([&] { first.create_run(run_info("2024")); }),
            "store: run name '2024' is all digits, which reads as a run id; choose a name with "
            "a letter in it");
  const int64_t id = first.create_run(run_info("taken"));
  EXPECT_EQ(error_of([&] { first.create_run(run_info("other")); }),
            "store: this writer already records run " + std::to_string(id) +
                "; use one RunWriter per run");
  EXPECT_EQ(error_of([&] { first.finish(RunStatus::Paused); }),
            "store: finish takes completed, stopped or failed, not paused");
  RunWriter second(path());
  EXPECT_EQ(error_of([&] { second.create_run(run_info("taken")); }),
            "store: a run named 'taken' already exists in " + path() + " (id " +
                std::to_string(id) + "); choose another name");
}

TEST_F(RunWriterTest, HeartbeatsKeepARunAliveAndStopAtTheEnd) {
  WriterOptions options;
  options.heartbeat_interval_s = 0.02;
  RunWriter writer(path(), options);
  const int64_t id = writer.create_run(run_info("alive"));
  auto db = open_store(path(), Access::ReadOnly);
  const double first = *get_run(*db, id).heartbeat_at;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const RunRecord later = get_run(*db, id, 0.15);
  EXPECT_GT(*later.heartbeat_at, first + 0.05);
  EXPECT_EQ(later.status, RunStatus::Running);  // fresh within 0.15 s
  writer.finish(RunStatus::Stopped);
  writer.flush();
  const double at_end = *get_run(*db, id).heartbeat_at;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(*get_run(*db, id).heartbeat_at, at_end);
  EXPECT_EQ(get_run(*db, id, 0).status, RunStatus::Stopped);  // ended runs are never lost
}

// The disk stalls (another connection holds the write lock): the queue must stay bounded,
// thin old intervals, count every dropped row in an event, and keep the newest rows.
TEST_F(RunWriterTest, CoalescesWhileTheDiskStallsAndCountsWhatItDrops) {
  constexpr int kRanks = 8, kSteps = 1000;
  constexpr size_t kCapacity = 800;
  WriterOptions options;
  options.max_queued_rows = kCapacity;
  options.heartbeat_interval_s = 0;
  options.busy_timeout_ms = 60000;
  RunWriter writer(path(), options);
  const int64_t id = writer.create_run(run_info("stalled"));

  Database blocker(path(), Access::ReadWrite);
  auto hold = std::make_unique<Transaction>(blocker);  // BEGIN IMMEDIATE: the write lock
  size_t most_queued = 0;
  for (int64_t step = 0; step < kSteps; ++step) {
    writer.log_metrics(interval(step, kRanks));
    most_queued = std::max(most_queued, writer.stats().queued_rows);
  }
  EXPECT_LE(most_queued, kCapacity);
  const WriterStats stalled = writer.stats();
  EXPECT_EQ(stalled.committed_transactions, 0);
  EXPECT_GT(stalled.dropped_rows, 0);
  hold->commit();
  hold.reset();
  writer.flush();

  auto db = open_store(path(), Access::ReadOnly);
  const auto rows = all_rows(*db, id);
  const WriterStats stats = writer.stats();
  EXPECT_EQ(static_cast<int64_t>(rows.size()) + stats.dropped_rows, kRanks * kSteps);
  EXPECT_EQ(stats.dropped_rows, stalled.dropped_rows);

  // Whole intervals are kept or dropped, each row intact, and the newest is there.
  std::map<int64_t, int> per_step;
  for (const auto& r : rows) {
    EXPECT_EQ(r.loss, loss_of(r.step, r.rank));
    ++per_step[r.step];
  }
  for (const auto& [step, n] : per_step) EXPECT_EQ(n, kRanks) << "step " << step;
  ASSERT_FALSE(per_step.empty());
  EXPECT_EQ(per_step.rbegin()->first, kSteps - 1);
  EXPECT_EQ(per_step.begin()->first, 0);

  // The dropped count is recorded, never silently lost.
  int64_t recorded = 0;
  for (const auto& e : list_events(*db, id)) {
    if (e.kind != "dropped") continue;
    EXPECT_NE(e.message.find(" metric rows (steps "), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("): the store could not keep up"), std::string::npos);
    recorded += std::stoll(e.message.substr(std::string("dropped ").size()));
  }
  EXPECT_EQ(recorded, stats.dropped_rows);
}

TEST_F(RunWriterTest, AFullDiskFailsFlushClearlyAndKeepsWhatWasCommitted) {
  WriterOptions options;
  options.heartbeat_interval_s = 0;
  options.on_open = [](Database& db) {
    db.exec("PRAGMA max_page_count = " + std::to_string(db.query_int("PRAGMA page_count") + 8));
  };
  int64_t id = 0;
  {
    RunWriter writer(path(), options);
    id = writer.create_run(run_info("full"));
    writer.log_metrics(interval(0, 4));
    writer.flush();  // small: fits
    for (int64_t step = 1; step <= 2000; ++step) writer.log_metrics(interval(step, 4));
    const auto start = std::chrono::steady_clock::now();
    std::string message;
    try {
      writer.flush();
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_EQ(message.rfind("store: " + path() +
                                ": disk full (database or disk is full); free space and retry (",
                            0),
              0u)
        << message;
    EXPECT_NE(message.find(" rows still queued; the writer keeps retrying)"), std::string::npos);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    EXPECT_GE(writer.stats().failed_commits, 1);
  }  // the destructor gives up after one more try instead of hanging
  auto db = open_store(path(), Access::ReadOnly);
  EXPECT_EQ(db->query_text("PRAGMA integrity_check"), "ok");
  // What was committed before the disk filled is there, whole and exact: a prefix of the
  // intervals, at least the first one that flush() confirmed.
  const auto rows = all_rows(*db, id);
  ASSERT_GE(rows.size(), 4u);
  EXPECT_LT(rows.size(), 4u * 2001);
  EXPECT_EQ(rows.size() % 4, 0u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].step, static_cast<int64_t>(i / 4));
    EXPECT_EQ(rows[i].loss, loss_of(rows[i].step, rows[i].rank));
  }
}

TEST_F(RunWriterTest, CommandsArePendingUntilMarked) {
  RunWriter writer(path());
  const int64_t id = writer.create_run(run_info("steered"));
  EXPECT_TRUE(writer.pending_commands().empty());

  auto client = open_store(path(), Access::ReadWrite);
  const int64_t pause = insert_command(*client, id, CommandAction::Pause);
  const int64_t lr = insert_command(*client, id, CommandAction::Set, "train.lr=1e-4");
  const int64_t bad = insert_command(*client, id, CommandAction::Set, "train.foo=1");

  auto pending = writer.pending_commands();
  ASSERT_EQ(pending.size(), 3u);
  EXPECT_EQ(pending[0].id, pause);
  EXPECT_EQ(pending[0].action, CommandAction::Pause);
  EXPECT_EQ(pending[1].argument, "train.lr=1e-4");
  EXPECT_EQ(pending[2].status, CommandStatus::Pending);

  writer.mark_command(pause, CommandStatus::Applied, 120);
  writer.mark_command(lr, CommandStatus::Applied, 121, "peak lr 3e-4 -> 1e-4");
  writer.mark_command(bad, CommandStatus::Rejected, 121, "train.foo cannot change while running");
  EXPECT_TRUE(writer.pending_commands().empty());
  EXPECT_EQ(error_of([&] { writer.mark_command(pause, CommandStatus::Rejected, 122); }),
            "store: command " + std::to_string(pause) + " (pause) is already applied");
  EXPECT_EQ(error_of([&] { writer.mark_command(999, CommandStatus::Applied, 1); }),
            "store: no command with id 999");

  const auto all = list_commands(*client, id);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].status, CommandStatus::Applied);
  EXPECT_EQ(all[0].applied_step, 120);
  EXPECT_TRUE(all[0].applied_at.has_value());
  EXPECT_EQ(all[2].status, CommandStatus::Rejected);
  EXPECT_EQ(all[2].reason, "train.foo cannot change while running");
  std::vector<std::string> messages;
  for (const auto& e : list_events(*client, id))
    if (e.kind == "command") messages.push_back(std::to_string(*e.step) + " " + e.message);
  EXPECT_EQ(messages, (std::vector<std::string>{
                          "120 pause applied at step 120",
                          "121 set train.lr=1e-4 applied at step 121: peak lr 3e-4 -> 1e-4",
                          "121 set train.foo=1 rejected at step 121: train.foo cannot change "
                          "while running"}));
}

}  // namespace
}  // namespace kiln::store
