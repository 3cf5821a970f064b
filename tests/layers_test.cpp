// scripts/check-layers against small trees of its own: it passes the arrows
// docs/architecture.md allows and fails, naming the file and the rule, on a planted upward
// include, a banned system header and a cycle between two folders of one room. (The real
// tree is checked by the test Layers.ArrowsPointOneWay.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/run_command.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// A tree with the real docs/architecture.md (its floors) and the given files.
std::string tree(const std::string& name, const std::vector<std::pair<std::string, std::string>>& files) {
  const std::string root = test::fresh_dir(name);
  fs::create_directories(root + "/docs");
  fs::copy_file(test::source_dir() + "/docs/architecture.md", root + "/docs/architecture.md");
  for (const auto& [path, text] : files) {
    fs::create_directories(fs::path(root + "/" + path).parent_path());
    std::ofstream(root + "/" + path) << text;
  }
  return root;
}

test::CommandResult check(const std::string& root) {
  return test::run_command(test::source_dir() + "/scripts/check-layers " + root);
}

TEST(Layers, DownwardIncludesPass) {
  const auto result = check(tree("layers-down", {{"base/check.h", "#pragma once\n"},
                                                 {"store/rows.h", "#include \"base/check.h\"\n#include <sqlite3.h>\n"},
                                                 {"trainer/train/a.cpp", "#include \"store/types.h\"\n#include \"kernels/ops.h\"\n"},
                                                 {"cli/main.cpp", "#include \"monitor/server/server.h\"\n"}}));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, "");
}

TEST(Layers, APlantedUpwardIncludeFailsNamingTheFileAndTheRule) {
  const auto result = check(tree("layers-up", {{"store/rows.h", "#include \"trainer/model/gpt_model.h\"\n"},
                                               {"trainer/train/a.cpp", "#include \"store/run_queries.h\"\n"}}));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.output,
            "check-layers: store/rows.h: includes \"trainer/model/gpt_model.h\", but store/ may include only base\n"
            "check-layers: trainer/train/a.cpp: includes \"store/run_queries.h\", but trainer/ may include only "
            "base, kernels, store/types.h, store/run_writer.h, store/metric_fields.h\n");
}

TEST(Layers, ABannedSystemHeaderFails) {
  const auto result = check(tree("layers-system", {{"trainer/a.cpp", "#include <boost/beast.hpp>\n"}}));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.output, "check-layers: trainer/a.cpp: includes <boost/beast.hpp>, which trainer/ never includes\n");
}

TEST(Layers, ACycleBetweenFoldersOfOneRoomFails) {
  const auto result = check(tree("layers-cycle", {{"trainer/plan/p.h", "#include \"trainer/train/t.h\"\n"},
                                                  {"trainer/train/t.cpp", "#include \"trainer/plan/p.h\"\n"},
                                                  {"trainer/train/t.h", "#pragma once\n"}}));
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.output,
            "check-layers: trainer/plan/ -> trainer/train/ -> trainer/plan/: a cycle between folders "
            "(trainer/plan/p.h includes trainer/train/t.h; trainer/train/t.cpp includes trainer/plan/p.h)\n");
}

TEST(Layers, TestCodeMayIncludeAnything) {
  const auto result = check(tree("layers-tests", {{"store/rows_test.cpp", "#include \"trainer/model/gpt_model.h\"\n"},
                                                  {"store/test_util.h", "#include \"tests/error_of.h\"\n"}}));
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

}  // namespace
}  // namespace kiln
