#include "store/lineage.h"

#include <gtest/gtest.h>

#include "store/run_writer.h"
#include "store/schema.h"
#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::run_info;
using testing_util::StoreTest;

class LineageTest : public StoreTest {};

int64_t record(const std::string& path, const std::string& name, const std::string& parent = {},
               int64_t step = 0) {
  RunWriter writer(path);
  RunInfo info = run_info(name);
  info.parent_name = parent;
  if (!parent.empty()) info.parent_step = step;
  const int64_t id = writer.create_run(info);
  writer.finish(RunStatus::Completed);
  writer.flush();
  return id;
}

TEST_F(LineageTest, ARunKnowsItsAncestorsAndItsForksWithTheirSteps) {
  const int64_t base = record(path(), "base");
  const int64_t low = record(path(), "low-lr", "base", 400);
  const int64_t lower = record(path(), "lower-lr", "low-lr", 600);
  const int64_t other = record(path(), "more-data", "base", 200);
  record(path(), "unrelated");
  auto db = open_store(path(), Access::ReadOnly);

  const Lineage middle = run_lineage(*db, low);
  ASSERT_EQ(middle.ancestors.size(), 1u);
  EXPECT_EQ(middle.ancestors[0].id, base);
  EXPECT_EQ(middle.ancestors[0].name, "base");
  EXPECT_EQ(middle.ancestors[0].step, 400);
  EXPECT_EQ(middle.ancestors[0].status, RunStatus::Completed);
  ASSERT_EQ(middle.forks.size(), 1u);
  EXPECT_EQ(middle.forks[0].id, lower);
  EXPECT_EQ(middle.forks[0].step, 600);

  const Lineage leaf = run_lineage(*db, lower);
  ASSERT_EQ(leaf.ancestors.size(), 2u);
  EXPECT_EQ(leaf.ancestors[0].name, "low-lr");
  EXPECT_EQ(leaf.ancestors[0].step, 600);
  EXPECT_EQ(leaf.ancestors[1].name, "base");
  EXPECT_EQ(leaf.ancestors[1].step, 400);
  EXPECT_TRUE(leaf.forks.empty());

  const Lineage root = run_lineage(*db, base);
  EXPECT_TRUE(root.ancestors.empty());
  ASSERT_EQ(root.forks.size(), 2u);
  EXPECT_EQ(root.forks[0].id, low);
  EXPECT_EQ(root.forks[1].id, other);
  EXPECT_EQ(root.forks[1].step, 200);
}

TEST_F(LineageTest, DeletingAParentLeavesItsForksWithoutOne) {
  record(path(), "base");
  const int64_t child = record(path(), "child", "base", 10);
  {
    auto db = open_store(path(), Access::ReadWrite);
    db->exec("DELETE FROM runs WHERE name = 'base'");
  }
  auto db = open_store(path(), Access::ReadOnly);
  EXPECT_TRUE(run_lineage(*db, child).ancestors.empty());
}

}  // namespace
}  // namespace kiln::store
