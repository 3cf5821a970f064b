#include "store/run_table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <string>
#include <vector>

#include "base/check.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::interval;
using testing_util::run_info;
using testing_util::StoreTest;

// Five runs, oldest first: their lr (one has none, one is text), tags, and logged steps.
class RunTableTest : public StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    struct Made {
      const char* name;
      const char* config;
      std::vector<std::string> tags;
      int steps;
    };
    const std::vector<Made> runs = {
        {"a", R"({"train":{"lr":0.01},"hub":{"token":"hf_secret"}})", {"x", "y"}, 3},
        {"b", R"({"train":{"lr":0.002},"hub":{"token":"hf_other"}})", {"y"}, 0},
        {"c", R"({"train":{}})", {}, 2},
        {"d", R"({"train":{"lr":"warm"}})", {"x"}, 1},
        {"e", R"({"train":{"lr":0.1}})", {}, 4},
    };
    for (size_t i = 0; i < runs.size(); ++i) {
      RunWriter writer(path());
      RunInfo info = run_info(runs[i].name);
      info.config_json = runs[i].config;
      info.tags = runs[i].tags;
      writer.create_run(info);
      for (int step = 1; step <= runs[i].steps; ++step) writer.log_metrics(interval(step * 10, 2));
      writer.finish(RunStatus::Completed);
      writer.flush();
    }
    db_ = open_store(path(), Access::ReadWrite);
    for (int i = 0; i < 5; ++i)
      db_->exec("UPDATE runs SET created_at = " + std::to_string(1.7e9 + 60.0 * i) + ", started_at = NULL WHERE id = " +
                std::to_string(i + 1));
  }

  std::vector<std::string> ordered(const RunOrder& order, const RunFilter& filter = {}) {
    std::vector<RunLine> lines = read_run_lines(*db_, filter, order, 1.8e9);
    order_run_lines(lines, order);
    std::vector<std::string> out;
    for (const RunLine& line : lines) out.push_back(line.group.empty() ? line.overview.run.name : line.group + "/" + line.overview.run.name);
    return out;
  }

  std::unique_ptr<Database> db_;
};

using Names = std::vector<std::string>;

RunOrder sorted_by(std::string sort, bool descending, std::string group = "") {
  return {std::move(sort), descending, std::move(group)};
}
RunOrder grouped_by(std::string group) { return {"started_at", true, std::move(group)}; }

TEST_F(RunTableTest, SortsByAColumnWithAbsentValuesLastInEitherDirection) {
  EXPECT_EQ(ordered({}), (Names{"e", "d", "c", "b", "a"})) << "newest first by default";
  EXPECT_EQ(ordered(sorted_by("last_step", false)), (Names{"d", "c", "a", "e", "b"}));
  EXPECT_EQ(ordered(sorted_by("last_step", true)), (Names{"e", "a", "c", "d", "b"}));
  // Loss is read for every run only to sort by it; b logged nothing.
  EXPECT_EQ(ordered(sorted_by("loss", true)).back(), "b");
  EXPECT_EQ(ordered(sorted_by("tags", false)), (Names{"d", "a", "b", "e", "c"})) << "x < x,y < y; none last";
}

TEST_F(RunTableTest, SortsByAConfigKeyNumbersAsNumbersThenTextThenAbsent) {
  EXPECT_EQ(ordered(sorted_by("config:train.lr", false)), (Names{"b", "a", "e", "d", "c"}));
  EXPECT_EQ(ordered(sorted_by("config:train.lr", true)), (Names{"d", "e", "a", "b", "c"}));
}

TEST_F(RunTableTest, GroupsByTagWithARunInEachOfItsTagsAndByAConfigKey) {
  EXPECT_EQ(ordered(grouped_by("tag")), (Names{"x/d", "x/a", "y/b", "y/a", "(no tags)/e", "(no tags)/c"}));
  std::vector<RunLine> lines = read_run_lines(*db_, {}, grouped_by("train.lr"), 1.8e9);
  order_run_lines(lines, grouped_by("train.lr"));
  const std::vector<RunGroup> groups = run_groups(lines);
  ASSERT_EQ(groups.size(), 5u);
  EXPECT_EQ(groups[0].label, "0.002");
  EXPECT_EQ(groups[3].label, "warm");
  EXPECT_EQ(groups[4].label, "—") << "absent last";
  EXPECT_EQ(groups[4].runs, 1u);
}

TEST_F(RunTableTest, HidesASecretsValueWhenSortingOrGroupingByIt) {
  std::vector<RunLine> lines = read_run_lines(*db_, {}, sorted_by("config:hub.token", true, "hub.token"), 1.8e9);
  order_run_lines(lines, grouped_by("hub.token"));
  for (const RunLine& line : lines) {
    EXPECT_EQ(line.group.find("hf_"), std::string::npos) << line.group;
    EXPECT_EQ(line.sort_value.dump().find("hf_"), std::string::npos) << line.sort_value.dump();
  }
  EXPECT_EQ(run_groups(lines)[0].label, "***");
}

TEST_F(RunTableTest, SearchWordsMatchANameOrATagInAnyCase) {
  RunFilter filter;
  filter.words = {"X"};
  EXPECT_EQ(ordered({}, filter), (Names{"d", "a"}));
  filter.words = {"x", "A"};
  EXPECT_EQ(ordered({}, filter), (Names{"a"}));
}

TEST_F(RunTableTest, CompletesTheLinesShownWithConfigStepsAndMeans) {
  std::vector<RunLine> lines = read_run_lines(*db_, {}, {}, 1.8e9);
  RunLine& a = lines.back();
  ASSERT_EQ(a.overview.run.name, "a");
  EXPECT_TRUE(a.overview.run.config_json.empty()) << "a line leaves the config's text out";
  EXPECT_TRUE(std::isnan(a.overview.loss));
  complete_line(*db_, a, 1.8e9);
  EXPECT_NE(a.overview.run.config_json.find("hf_secret"), std::string::npos);
  EXPECT_DOUBLE_EQ(a.overview.loss, (testing_util::loss_of(30, 0) + testing_util::loss_of(30, 1)) / 2);
}

TEST_F(RunTableTest, ConfigKeysComeFromTheNewestRuns) {
  EXPECT_EQ(recent_config_keys(*db_, 2, 10), (Names{"train.lr"}));
  EXPECT_EQ(recent_config_keys(*db_, 5, 10), (Names{"hub.token", "train.lr"}));
  EXPECT_EQ(recent_config_keys(*db_, 5, 1), (Names{"hub.token"}));
}

TEST_F(RunTableTest, RefusesAnUnknownOrderInOneLine) {
  EXPECT_THROW(check_order(sorted_by("speed", true)), Error);
  EXPECT_THROW(check_order(grouped_by("not a key")), Error);
  EXPECT_NO_THROW(check_order(sorted_by("config:model.n_layer", true, "tag")));
}

}  // namespace
}  // namespace kiln::store
