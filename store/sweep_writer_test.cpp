#include "store/sweep_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::error_of;
using testing_util::StoreTest;

class SweepWriterTest : public StoreTest {
 protected:
  NewSweep sweep(const std::string& name, int points = 2) {
    NewSweep s;
    s.name = name;
    s.spec_json = R"({"grid": ["train.lr=1,2"]})";
    s.command_line = "kiln sweep --grid train.lr=1,2 --set serve.token=hunter2";
    s.workdir = "/work";
    s.host = "here";
    s.pid = 12345;
    for (int i = 0; i < points; ++i) s.points.push_back("{\"train.lr\": " + std::to_string(i + 1) + "}");
    return s;
  }
};

TEST_F(SweepWriterTest, CreatesTheSweepAndEveryPointAtOnce) {
  auto db = open_store(path(), Access::ReadWrite);
  const int64_t id = create_sweep(*db, sweep("lr"));
  EXPECT_EQ(db->query_text("SELECT name || ' ' || workdir || ' ' || host || ' ' || pid FROM sweeps"),
            "lr /work here 12345");
  EXPECT_EQ(db->query_text("SELECT command_line FROM sweeps"), "kiln sweep --grid train.lr=1,2 --set serve.token=***");
  EXPECT_EQ(db->query_int("SELECT heartbeat_at IS NOT NULL AND ended_at IS NULL FROM sweeps"), 1);
  EXPECT_EQ(db->query_text("SELECT group_concat(point || ':' || params_json, ' ') FROM "
                           "(SELECT * FROM sweep_points WHERE sweep_id = " + std::to_string(id) + " ORDER BY point)"),
            "0:{\"train.lr\": 1} 1:{\"train.lr\": 2}");
  EXPECT_EQ(db->query_int("SELECT count(*) FROM sweep_points WHERE run_name IS NULL"), 2);

  set_point_run(*db, id, 1, "lr-1");
  EXPECT_EQ(db->query_text("SELECT run_name FROM sweep_points WHERE point = 1"), "lr-1");
  EXPECT_EQ(error_of([&] { set_point_run(*db, id, 7, "lr-7"); }), "store: sweep 1 has no point 7");

  EXPECT_EQ(db->query_text("SELECT status FROM sweeps"), "live");
  end_sweep(*db, id, SweepStatus::Ended);
  EXPECT_EQ(db->query_int("SELECT ended_at IS NOT NULL AND pid IS NULL FROM sweeps"), 1);
  EXPECT_EQ(db->query_text("SELECT status FROM sweeps"), "ended");
  end_sweep(*db, id, SweepStatus::Interrupted);
  EXPECT_EQ(db->query_text("SELECT status FROM sweeps"), "interrupted");
}

TEST_F(SweepWriterTest, RefusesATakenNameBadTextAndTooManyPointsWritingNothing) {
  auto db = open_store(path(), Access::ReadWrite);
  create_sweep(*db, sweep("lr"));
  EXPECT_EQ(error_of([&] { create_sweep(*db, sweep("lr")); }),
            "store: a sweep named 'lr' already exists in " + path() +
                " (id 1); choose another --name, or continue it with --resume lr");
  EXPECT_EQ(error_of([&] { create_sweep(*db, sweep("../up")); }).substr(0, 25), "store: run name '../up' s");
  NewSweep bad = sweep("bad");
  bad.points[1] = "{not json";
  EXPECT_EQ(error_of([&] { create_sweep(*db, bad); }), "store: a point's parameters is not valid JSON");
  EXPECT_EQ(error_of([&] { create_sweep(*db, sweep("none", 0)); }), "store: a sweep has 1 to 10000 points, not 0");
  EXPECT_EQ(error_of([&] { create_sweep(*db, sweep("huge", 10001)); }),
            "store: a sweep has 1 to 10000 points, not 10001");
  EXPECT_EQ(db->query_int("SELECT count(*) FROM sweeps"), 1);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM sweep_points"), 2);
}

TEST_F(SweepWriterTest, AClaimRefusesALiveSweepAndTakesUpAnInterruptedOne) {
  auto db = open_store(path(), Access::ReadWrite);
  NewSweep live = sweep("lr");
  live.host = "elsewhere";
  const int64_t id = create_sweep(*db, live);
  set_point_run(*db, id, 0, "lr-0");
  EXPECT_EQ(error_of([&] { claim_sweep(*db, id, "here", 99, 30); }).substr(0, 70),
            "store: sweep 'lr' is still running (pid 12345 on elsewhere, last heart");

  // Its heartbeat is stale: the process died without ending it.
  db->exec("UPDATE sweeps SET heartbeat_at = heartbeat_at - 60");
  const ClaimedSweep claimed = claim_sweep(*db, id, "here", 99, 30);
  EXPECT_EQ(claimed.name, "lr");
  EXPECT_EQ(claimed.ended_as, SweepStatus::Interrupted) << "its process died without a word";
  EXPECT_EQ(claimed.spec_json, R"({"grid": ["train.lr=1,2"]})");
  EXPECT_EQ(claimed.workdir, "/work");
  ASSERT_EQ(claimed.points.size(), 2u);
  EXPECT_EQ(claimed.points[0].run_name, "lr-0");
  EXPECT_EQ(claimed.points[1].run_name, "");
  EXPECT_EQ(claimed.points[1].params_json, R"({"train.lr": 2})");
  EXPECT_EQ(db->query_text("SELECT host || ' ' || pid FROM sweeps"), "here 99");

  // Ended: taken up at once, live again. On this host with no process of its pid: taken up too.
  end_sweep(*db, id, SweepStatus::Ended);
  EXPECT_EQ(claim_sweep(*db, id, "here", 100, 30).ended_as, SweepStatus::Ended);
  EXPECT_EQ(db->query_text("SELECT status || ' ' || (ended_at IS NULL) FROM sweeps"), "live 1");
  db->exec("UPDATE sweeps SET pid = 2147483646");
  claim_sweep(*db, id, "here", ::getpid(), 30);
  EXPECT_EQ(error_of([&] { claim_sweep(*db, 42, "here", 1, 30); }), "store: no sweep with id 42 in " + path());
}

TEST_F(SweepWriterTest, TheHeartbeatBeatsUntilDestroyed) {
  auto db = open_store(path(), Access::ReadWrite);
  const int64_t id = create_sweep(*db, sweep("lr"));
  db->exec("UPDATE sweeps SET heartbeat_at = 0");
  {
    SweepHeartbeat beat(path(), id, std::chrono::milliseconds(10));
    while (db->query_int("SELECT heartbeat_at > 0 FROM sweeps") == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  db->exec("UPDATE sweeps SET heartbeat_at = 0");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(db->query_int("SELECT heartbeat_at FROM sweeps"), 0);
}

}  // namespace
}  // namespace kiln::store
