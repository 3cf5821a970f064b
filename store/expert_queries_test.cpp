// The expert_loads table: what RunWriter::log_expert_loads keeps and refuses, the imbalance
// it derives, how the readers hand loads back (ranges, downsampling, latest per layer, after a
// step), the export, and how the write queue bounds them.
#include "store/expert_queries.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <variant>

#include "store/expert_load.h"
#include "store/export.h"
#include "store/json_rows.h"
#include "store/run_details.h"
#include "store/run_queries.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "store/test_util.h"
#include "store/write_queue.h"

namespace kiln::store {
namespace {

using testing_util::error_of;
using testing_util::run_info;
using testing_util::StoreTest;

class ExpertQueriesTest : public StoreTest {};

// Layer `layer` at `step` over 4 experts: expert 0 takes more as the steps go, so each row's
// values say which (step, layer) it is.
ExpertLoad load_at(int64_t step, int layer) {
  ExpertLoad load;
  load.step = step;
  load.layer = layer;
  load.tokens = {100 + step, 100, 100 - layer, 100};
  load.dropped = {0, 0, 0, 0};
  load.aux_loss = 0.01 * (layer + 1) + 0.0001 * static_cast<double>(step);
  load.router_entropy = 1.3 - 0.001 * static_cast<double>(step);
  return load;
}

std::vector<ExpertLoad> step_loads(int64_t step, std::initializer_list<int> layers) {
  std::vector<ExpertLoad> loads;
  for (int layer : layers) loads.push_back(load_at(step, layer));
  return loads;
}

TEST(ExpertImbalance, IsTheBusiestExpertOverTheMean) {
  EXPECT_DOUBLE_EQ(expert_imbalance(std::vector<int64_t>{25, 25, 25, 25}), 1.0);
  // mean 40, max 100
  EXPECT_DOUBLE_EQ(expert_imbalance(std::vector<int64_t>{100, 20, 20, 20}), 2.5);
  EXPECT_DOUBLE_EQ(expert_imbalance(std::vector<int64_t>{0, 0, 64, 0, 0, 0, 0, 0}), 8.0) << "all on one of 8";
  EXPECT_TRUE(std::isnan(expert_imbalance(std::vector<int64_t>{0, 0})));
  EXPECT_TRUE(std::isnan(expert_imbalance(std::vector<int64_t>{})));
}

TEST_F(ExpertQueriesTest, WriterKeepsEachLayersCountsAndTheImbalance) {
  int64_t id = 0;
  {
    RunWriter writer(path());
    id = writer.create_run(run_info("moe"));
    ExpertLoad capped = load_at(10, 3);
    capped.tokens = {300, 60, 20, 20};
    capped.dropped = {44, 0, 0, 0};
    writer.log_expert_loads({load_at(10, 1), capped});
    writer.flush();
  }
  auto db = open_store(path(), Access::ReadOnly);
  const auto loads = list_expert_loads(*db, id, {});
  ASSERT_EQ(loads.size(), 2u);
  EXPECT_EQ(loads[0].layer, 1);
  EXPECT_EQ(loads[0].step, 10);
  EXPECT_EQ(loads[0].tokens, (std::vector<int64_t>{110, 100, 99, 100}));
  EXPECT_TRUE(loads[0].dropped.empty()) << "all zero is stored as none dropped";
  EXPECT_DOUBLE_EQ(loads[0].aux_loss, 0.021);
  EXPECT_DOUBLE_EQ(loads[0].router_entropy, 1.29);
  EXPECT_EQ(loads[1].layer, 3);
  EXPECT_EQ(loads[1].tokens, (std::vector<int64_t>{300, 60, 20, 20}));
  EXPECT_EQ(loads[1].dropped, (std::vector<int64_t>{44, 0, 0, 0}));
  // The column SQL ranks layers by: 300 / (400 / 4) = 3.
  EXPECT_EQ(db->query_int("SELECT layer FROM expert_loads ORDER BY imbalance DESC LIMIT 1"), 3);
  Statement st(*db, "SELECT imbalance FROM expert_loads WHERE layer = 3");
  ASSERT_TRUE(st.step());
  EXPECT_DOUBLE_EQ(st.real(0), 3.0);
  const nlohmann::json json = to_json(loads[1]);
  EXPECT_DOUBLE_EQ(json["imbalance"].get<double>(), 3.0);
  EXPECT_EQ(json["dropped"], nlohmann::json({44, 0, 0, 0}));
  EXPECT_EQ(to_json(loads[0])["dropped"], nlohmann::json::array());
}

TEST_F(ExpertQueriesTest, CountsPastFourBillionRoundTrip) {
  int64_t id = 0;
  {
    RunWriter writer(path());
    id = writer.create_run(run_info("big"));
    ExpertLoad load = load_at(1, 0);
    load.tokens = {int64_t{5} << 32, 1, 0, (int64_t{1} << 62) + 7};
    writer.log_expert_loads({load});
    writer.flush();
  }
  auto db = open_store(path(), Access::ReadOnly);
  EXPECT_EQ(list_expert_loads(*db, id, {})[0].tokens,
            (std::vector<int64_t>{int64_t{5} << 32, 1, 0, (int64_t{1} << 62) + 7}));
}

TEST_F(ExpertQueriesTest, RefusesLoadsPastItsBoundsInOneLine) {
  RunWriter writer(path());
  writer.create_run(run_info("refused"));
  ExpertLoad wide = load_at(7, 2);
  wide.tokens.assign(kMaxExpertsPerLayer + 1, 1);
  EXPECT_EQ(error_of([&] { writer.log_expert_loads({wide}); }),
            "store: expert loads of layer 2 at step 7: 1025 experts; the store keeps 1 to 1024 per layer");
  ExpertLoad none = load_at(7, 2);
  none.tokens.clear();
  none.dropped.clear();
  EXPECT_EQ(error_of([&] { writer.log_expert_loads({none}); }),
            "store: expert loads of layer 2 at step 7: 0 experts; the store keeps 1 to 1024 per layer");
  EXPECT_EQ(error_of([&] { writer.log_expert_loads({load_at(7, 512)}); }),
            "store: expert loads of layer 512 at step 7: the layer index must be from 0 to 511");
  EXPECT_EQ(error_of([&] { writer.log_expert_loads({load_at(7, -1)}); }),
            "store: expert loads of layer -1 at step 7: the layer index must be from 0 to 511");
  ExpertLoad mismatched = load_at(7, 2);
  mismatched.dropped = {1, 2};
  EXPECT_EQ(error_of([&] { writer.log_expert_loads({mismatched}); }),
            "store: expert loads of layer 2 at step 7: 2 dropped counts for 4 experts (give one per expert, or none when "
            "dropless)");
  ExpertLoad negative = load_at(7, 2);
  negative.tokens[1] = -5;
  EXPECT_EQ(error_of([&] { writer.log_expert_loads({negative}); }),
            "store: expert loads of layer 2 at step 7: a negative token count");
  EXPECT_EQ(error_of([&] { writer.log_expert_loads({load_at(7, 2), load_at(7, 2)}); }),
            "store: expert loads of layer 2 at step 7: given twice in one call");
  std::vector<ExpertLoad> too_many(kMaxExpertLayers + 1, load_at(7, 0));
  EXPECT_EQ(error_of([&] { writer.log_expert_loads(too_many); }),
            "store: 513 expert loads in one call; the store keeps at most 512 (one per MoE layer)");
  writer.flush();
  auto db = open_store(path(), Access::ReadOnly);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM expert_loads"), 0) << "nothing of a refused call is kept";
}

TEST_F(ExpertQueriesTest, ReadsALayerOverAStepRangeAndEachLayersLatest) {
  int64_t id = 0;
  {
    RunWriter writer(path());
    id = writer.create_run(run_info("ranges"));
    for (int64_t step = 1; step <= 20; ++step) writer.log_expert_loads(step_loads(step, {1, 3}));
    writer.log_expert_loads(step_loads(21, {1}));  // layer 3 has no load at step 21
    writer.flush();
  }
  auto db = open_store(path(), Access::ReadOnly);
  EXPECT_EQ(expert_layers(*db, id), (std::vector<int>{1, 3}));
  EXPECT_EQ(last_expert_step(*db, id), 21);

  ExpertRange range;
  range.layer = 3;
  range.from = 5;
  range.to = 8;
  const auto layer3 = list_expert_loads(*db, id, range);
  ASSERT_EQ(layer3.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(layer3[i].layer, 3);
    EXPECT_EQ(layer3[i].step, static_cast<int64_t>(5 + i));
    EXPECT_EQ(layer3[i].tokens[0], static_cast<int64_t>(105 + i));
  }
  range.layer.reset();
  const auto both = list_expert_loads(*db, id, range);
  ASSERT_EQ(both.size(), 8u) << "by layer, then step";
  EXPECT_EQ(both[0].layer, 1);
  EXPECT_EQ(both[3].step, 8);
  EXPECT_EQ(both[4].layer, 3);
  EXPECT_EQ(both[4].step, 5);

  const auto latest = latest_expert_loads(*db, id);
  ASSERT_EQ(latest.size(), 2u);
  EXPECT_EQ(latest[0].layer, 1);
  EXPECT_EQ(latest[0].step, 21);
  EXPECT_EQ(latest[1].layer, 3);
  EXPECT_EQ(latest[1].step, 20) << "each layer's own latest";
  EXPECT_EQ(worst_expert_layer(latest)->layer, 1) << "layer 1's expert 0 has 121 of 421 tokens";
  EXPECT_EQ(run_details(*db, id).latest_experts.size(), 2u);
  EXPECT_TRUE(expert_layers(*db, id + 1).empty());
  EXPECT_FALSE(last_expert_step(*db, id + 1).has_value());
}

TEST_F(ExpertQueriesTest, ALongRangeComesDownsampledEvenlyWithBothEnds) {
  int64_t id = 0;
  {
    RunWriter writer(path());
    id = writer.create_run(run_info("long"));
    for (int64_t step = 0; step <= 1000; step += 10) writer.log_expert_loads(step_loads(step, {0}));
    writer.flush();
  }
  auto db = open_store(path(), Access::ReadOnly);
  ExpertRange range;
  range.max_steps = 11;
  const auto rows = list_expert_loads(*db, id, range);
  ASSERT_EQ(rows.size(), 11u);
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i].step, static_cast<int64_t>(i) * 100) << i;
  range.max_steps = 101;
  EXPECT_EQ(list_expert_loads(*db, id, range).size(), 101u) << "every row fits";
  range.max_steps = std::numeric_limits<size_t>::max();
  EXPECT_EQ(list_expert_loads(*db, id, range).size(), 101u) << "no bound";
  range.max_steps = 1;
  ASSERT_EQ(list_expert_loads(*db, id, range).size(), 1u);
  range.max_steps = 3;
  range.from = 95;
  range.to = 405;
  const auto inside = list_expert_loads(*db, id, range);
  ASSERT_EQ(inside.size(), 3u);
  EXPECT_EQ(inside[0].step, 100);
  EXPECT_EQ(inside[1].step, 250);
  EXPECT_EQ(inside[2].step, 400);
  range.from = 500;
  range.to = 400;
  EXPECT_TRUE(list_expert_loads(*db, id, range).empty());
}

TEST_F(ExpertQueriesTest, LoadsAfterAStepComeInWholeStepsOldestFirst) {
  int64_t id = 0;
  {
    RunWriter writer(path());
    id = writer.create_run(run_info("tail"));
    for (int64_t step = 1; step <= 5; ++step) writer.log_expert_loads(step_loads(step, {0, 1, 2}));
    writer.flush();
  }
  auto db = open_store(path(), Access::ReadOnly);
  const auto after = expert_loads_after(*db, id, 2, 100);
  ASSERT_EQ(after.size(), 9u);
  EXPECT_EQ(after[0].step, 3);
  EXPECT_EQ(after[0].layer, 0);
  EXPECT_EQ(after[2].layer, 2);
  EXPECT_EQ(after[8].step, 5);
  // 7 rows cannot hold three steps of three layers: the newest two whole steps come.
  const auto bounded = expert_loads_after(*db, id, 0, 7);
  ASSERT_EQ(bounded.size(), 6u);
  EXPECT_EQ(bounded.front().step, 4);
  EXPECT_EQ(bounded.back().step, 5);
  EXPECT_TRUE(expert_loads_after(*db, id, 5, 100).empty());
}

TEST_F(ExpertQueriesTest, ExportsEveryLoadAsCsvAndJson) {
  int64_t id = 0;
  {
    RunWriter writer(path());
    id = writer.create_run(run_info("exported"));
    ExpertLoad load;
    load.step = 4;
    load.layer = 1;
    load.tokens = {30, 10};
    load.dropped = {2, 0};
    load.aux_loss = 0.5;
    load.router_entropy = 0.25;
    writer.log_expert_loads({load});
    writer.flush();
  }
  auto db = open_store(path(), Access::ReadOnly);
  std::ostringstream csv;
  write_experts_csv(*db, id, csv);
  EXPECT_EQ(csv.str(), std::string(kExpertsCsvHeader) +
                           "\nexported,4,1,0,30,2,0.5,0.25,1.5\n"
                           "exported,4,1,1,10,0,0.5,0.25,1.5\n");
  std::ostringstream json_text;
  write_run_json(*db, id, json_text);
  const auto json = nlohmann::json::parse(json_text.str());
  ASSERT_EQ(json["experts"].size(), 1u);
  EXPECT_EQ(json["experts"][0]["tokens"], nlohmann::json({30, 10}));
  EXPECT_EQ(json["experts"][0]["dropped"], nlohmann::json({2, 0}));
  EXPECT_DOUBLE_EQ(json["experts"][0]["imbalance"].get<double>(), 1.5);
}

TEST_F(ExpertQueriesTest, RemovingARunRemovesItsExpertLoads) {
  int64_t id = 0;
  {
    RunWriter writer(path());
    id = writer.create_run(run_info("gone"));
    writer.log_expert_loads(step_loads(1, {0, 1}));
    writer.finish(RunStatus::Completed);
    writer.flush();
  }
  auto db = open_store(path(), Access::ReadWrite);
  remove_run(*db, id);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM expert_loads"), 0);
}

// A stall thins whole steps of expert loads against their own capacity (in experts), the
// newest always kept, the loss counted in the dropped event.
TEST(ExpertQueue, ExpertLoadsThinByStepsWithinTheirCapacity) {
  WriteQueue q(64, 10, 4 * 2 * 10);  // ten steps of two 4-expert layers
  for (int64_t s = 0; s < 1000; ++s) {
    q.push(ExpertBatch{step_loads(s, {0, 1})});
    ASSERT_LE(q.experts(), 80u);
  }
  Batch b = q.take();
  int64_t kept = 0, last = -1;
  for (const auto& item : b.items)
    if (const auto* e = std::get_if<ExpertBatch>(&item)) ++kept, last = e->loads.front().step;
  EXPECT_EQ(kept + b.dropped.expert_steps, 1000);
  EXPECT_EQ(last, 999);
  EXPECT_EQ(b.dropped.describe(),
            "dropped " + std::to_string(b.dropped.expert_steps) + " steps of expert loads: the store could not keep up");
  EXPECT_EQ(q.experts(), 0u);
}

}  // namespace
}  // namespace kiln::store
