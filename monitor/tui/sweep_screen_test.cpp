// The sweep screen over a store holding a sweep of four points (two finished, one training,
// one not launched), drawn into an 110 x 24 curses screen and read back.
#include "monitor/tui/sweep_screen.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "monitor/tui/test_screen.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::tui {
namespace {

class SweepScreenTest : public store::testing_util::StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    {
      auto db = store::open_store(path(), store::Access::ReadWrite);
      db->exec("INSERT INTO sweeps (id, name, created_at, heartbeat_at, command_line) VALUES (7, 'lr', " +
               std::to_string(store::unix_now()) + ", " + std::to_string(store::unix_now()) +
               ", 'kiln sweep --config base.json --grid train.lr=1e-4,1e-3 --grid model.d_model=64,128')");
      db->exec(R"(INSERT INTO sweep_points (sweep_id, point, params_json, run_name) VALUES
                  (7, 0, '{"train.lr":0.0001,"model.d_model":64}', 'lr-0'),
                  (7, 1, '{"train.lr":0.001,"model.d_model":64}', 'lr-1'),
                  (7, 2, '{"train.lr":0.0001,"model.d_model":128}', 'lr-2'),
                  (7, 3, '{"train.lr":0.001,"model.d_model":128}', NULL))");
    }
    add_run("lr-0", 0, 3.0, 3.1, true);
    add_run("lr-1", 1, 2.0, 2.1, true);
    add_run("lr-2", 2, 2.5, store::kNoValue, false);
  }

  // A run of one rank that logged steps 1..10, its loss falling to `final_loss`.
  void add_run(const std::string& name, int64_t point, double final_loss, double valid, bool finished) {
    store::RunWriter writer(path());
    store::RunInfo info = store::testing_util::run_info(name);
    info.sweep_id = 7;
    info.sweep_point = point;
    writer.create_run(info);
    for (int64_t step = 1; step <= 10; ++step) {
      store::MetricRow row;
      row.step = step;
      row.loss = final_loss + 0.1 * static_cast<double>(10 - step);
      row.tokens_per_s = 1500;
      writer.log_metrics({row});
    }
    if (!std::isnan(valid)) writer.log_valid({10, 0, valid});
    if (finished) writer.finish(store::RunStatus::Completed);
    writer.flush();
  }

  // Draws the screen, loaded afresh, into `screen`.
  void draw(Screen& s, Session& session) {
    erase();
    s.load(session);
    s.draw(session, LINES - 1);
  }
};

bool shows(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST_F(SweepScreenTest, TablesThePointsMarksTheBestAndPlotsLossByParameter) {
  TestScreen screen(110, 24);
  Session session(store::open_store(path(), store::Access::ReadOnly), Theme(false), {});
  auto sweep = make_sweep_screen(7);
  draw(*sweep, session);
  const std::string text = screen.text();
  EXPECT_EQ(screen.row(0), " sweep lr · live · 2/4 done, 1 running, 0 failed · best point 1 by final valid loss");
  EXPECT_EQ(screen.row(1), " kiln sweep --config base.json --grid train.lr=1e-4,1e-3 --grid model.d_model=64,128");
  EXPECT_TRUE(shows(screen.row(2), "#") && shows(screen.row(2), "train.lr") && shows(screen.row(2), "model.d_model") &&
              shows(screen.row(2), "RUN") && shows(screen.row(2), "V.FINAL")) << text;
  // Point order; the best point's row flagged with '*'.
  EXPECT_TRUE(shows(screen.row(3), "0") && shows(screen.row(3), "0.0001") && shows(screen.row(3), "lr-0") &&
              shows(screen.row(3), "completed") && shows(screen.row(3), "3.0000") && shows(screen.row(3), "3.1000")) << text;
  EXPECT_EQ(screen.cell(4, 0), "*") << text;
  EXPECT_TRUE(shows(screen.row(4), "lr-1") && shows(screen.row(4), "2.0000") && shows(screen.row(4), "2.1000")) << text;
  EXPECT_TRUE(shows(screen.row(5), "lr-2") && shows(screen.row(5), "running") && shows(screen.row(5), "1.5k")) << text;
  EXPECT_TRUE(shows(screen.row(6), "pending")) << text;
  // The scatter of the two points that validated: the best one '*', the other 'o'.
  EXPECT_TRUE(shows(text, "final valid loss by train.lr (* the best point; p: next parameter)")) << text;
  EXPECT_TRUE(shows(text, "3.1|o")) << "the worse point at the top left\n" << text;
  EXPECT_TRUE(shows(text, "2.1|") && shows(text, "*\n")) << "the best at the bottom right\n" << text;

  EXPECT_EQ(sweep->key('p', session).kind, Outcome::Kind::Handled);
  draw(*sweep, session);
  EXPECT_TRUE(shows(screen.text(), "final valid loss by model.d_model")) << screen.text();

  // By loss: the best point first, those without a validation loss last.
  sweep->key('s', session);
  draw(*sweep, session);
  EXPECT_TRUE(shows(screen.row(3), "lr-1")) << screen.text();
  EXPECT_TRUE(shows(screen.row(4), "lr-0")) << screen.text();
}

TEST_F(SweepScreenTest, EnterOpensTheSelectedPointsRunOrSaysItHasNone) {
  TestScreen screen(110, 24);
  Session session(store::open_store(path(), store::Access::ReadOnly), Theme(false), {});
  auto sweep = make_sweep_screen(7);
  draw(*sweep, session);
  const Outcome opened = sweep->key('\n', session);
  EXPECT_EQ(opened.kind, Outcome::Kind::Push);
  ASSERT_NE(opened.next, nullptr);
  EXPECT_EQ(opened.next->title(), "Run");
  sweep->key(KEY_END, session);
  EXPECT_EQ(sweep->key('\n', session).kind, Outcome::Kind::Handled);
  EXPECT_EQ(session.message(store::unix_now()), "point 3 has no run yet");
}

}  // namespace
}  // namespace kiln::tui
