// A store's label: its file's stem, held to a run name's characters, made unique in order.
#include "monitor/server/store_labels.h"

#include <gtest/gtest.h>

namespace kiln::monitor {
namespace {

TEST(StoreLabels, AreTheStemsMadeUniqueInOrder) {
  EXPECT_EQ(store_labels({"/data/gpu-node-a.db", "/data/gpu-node-b.db"}),
            (std::vector<std::string>{"gpu-node-a", "gpu-node-b"}));
  // A clash takes the first free -N; a later file whose stem is that label moves on too.
  EXPECT_EQ(store_labels({"a/runs.db", "b/runs.db", "c/runs.db", "d/runs-2.db"}),
            (std::vector<std::string>{"runs", "runs-2", "runs-3", "runs-2-2"}));
  // Never a ':' (it ends the label in an address) nor anything else a run name may not hold.
  EXPECT_EQ(store_labels({"x/host:1 store.db", "kiln-runs.v2.db", "/"}),
            (std::vector<std::string>{"host_1_store", "kiln-runs.v2", "store"}));
}

}  // namespace
}  // namespace kiln::monitor
