// A fine-tune's recipe: configs/finetune-*.json as the overrides kiln finetune applies.
#include "trainer/train/finetune_setup.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/error_of.h"
#include "tests/test_files.h"
#include "trainer/config/config.h"

namespace kiln {
namespace {

TEST(FinetuneRecipe, EveryShippedRecipeAppliesOverAConfig) {
  size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(KILN_SOURCE_DIR "/configs")) {
    if (!entry.path().filename().string().starts_with("finetune-")) continue;
    SCOPED_TRACE(entry.path().string());
    // Over a Llama-family config, whose layers every LoRA target names.
    const Config config = load_config(KILN_SOURCE_DIR "/configs/llama-1b.json", recipe_overrides(entry.path().string()));
    // Whole conversations a sample, each seeing only itself.
    EXPECT_EQ(config.data.samples, "packed");
    EXPECT_TRUE(config.data.reset_attention_mask && config.data.reset_position_ids && config.data.eod_mask_loss);
    ++count;
  }
  EXPECT_GE(count, 1u);
}

TEST(FinetuneRecipe, SettingsBecomeOverridesInOneLineEach) {
  const std::string path = test::fresh_dir("recipe") + "/r.json";
  std::ofstream(path) << R"({"train": {"lr": 0.0001, "decay": "linear"}, "data": {"paths": ["a"]},)"
                          R"( "finetune": {"lora": {"rank": 8}}})";
  EXPECT_EQ(recipe_overrides(path), (std::vector<std::string>{"data.paths=[\"a\"]", "finetune.lora.rank=8",
                                                              "train.decay=linear", "train.lr=0.0001"}));
  std::ofstream(path) << R"({"train": 3})";
  EXPECT_EQ(test::error_of([&] { recipe_overrides(path); }),
            "finetune: the recipe " + path + "'s \"train\" is not an object of settings");
  std::ofstream(path) << "[1]";
  EXPECT_EQ(test::error_of([&] { recipe_overrides(path); }),
            "finetune: the recipe " + path + " is not a JSON object of config sections");
}

}  // namespace
}  // namespace kiln
