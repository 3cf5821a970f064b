// The samples table: what the writer keeps of a validation step's generated text, how the
// readers hand it back, and how the write queue bounds it.
#include "store/sample_queries.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "base/utf8.h"
#include "store/json_rows.h"
#include "store/run_details.h"
#include "store/run_queries.h"
#include "store/run_writer.h"
#include "store/schema.h"
#include "store/test_util.h"
#include "store/write_queue.h"

namespace kiln::store {
namespace {

using testing_util::run_info;
using testing_util::StoreTest;

class SampleQueriesTest : public StoreTest {};

Sample sample_at(int64_t step, std::string text) {
  Sample s;
  s.step = step;
  s.prompt = "In the beginning";
  s.text = std::move(text);
  s.temperature = 0.8;
  return s;
}

TEST_F(SampleQueriesTest, WriterKeepsEachStepsSampleAndReadersGiveTheNewestOldestFirst) {
  int64_t id = 0;
  {
    RunWriter writer(path());
    id = writer.create_run(run_info("sampled"));
    for (int64_t step = 10; step <= 50; step += 10)
      writer.log_samples({sample_at(step, " text at " + std::to_string(step))});
    writer.log_samples({sample_at(50, " written again by a resumed run")});
    writer.finish(RunStatus::Completed);
    writer.flush();
  }
  auto db = open_store(path(), Access::ReadOnly);
  const auto newest = list_samples(*db, id, 3);
  ASSERT_EQ(newest.size(), 3u);
  EXPECT_EQ(newest[0].step, 30);
  EXPECT_EQ(newest[2].step, 50);
  EXPECT_EQ(newest[2].text, " written again by a resumed run");
  EXPECT_EQ(newest[0].prompt, "In the beginning");
  EXPECT_DOUBLE_EQ(newest[0].temperature, 0.8);
  EXPECT_GT(newest[0].time, 1.7e9) << "stamped when queued";

  const auto after = list_samples(*db, id, 100, 30);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0].step, 40);
  EXPECT_EQ(list_samples(*db, id, 100).size(), 5u);

  const RunDetails details = run_details(*db, id);
  ASSERT_EQ(details.latest_samples.size(), 1u);
  EXPECT_EQ(details.latest_samples[0].step, 50);
  const nlohmann::json json = to_json(details);
  ASSERT_EQ(json["latest_samples"].size(), 1u);
  EXPECT_EQ(json["latest_samples"][0]["text"], " written again by a resumed run");
  EXPECT_EQ(json["latest_samples"][0]["prompt"], "In the beginning");
  EXPECT_EQ(json["latest_samples"][0]["step"], 50);
  EXPECT_EQ(json["latest_samples"][0]["slot"], 0);
}

// Several prompts: a step keeps one sample per prompt, in the prompts' order; sampled again
// (a resumed run) with fewer, the step keeps only the new ones.
TEST_F(SampleQueriesTest, AStepKeepsOneSamplePerPromptAndASecondWritingReplacesThemAll) {
  const auto at = [](int64_t step, int slot, const std::string& prompt) {
    Sample s = sample_at(step, " after " + prompt);
    s.slot = slot;
    s.prompt = prompt;
    return s;
  };
  int64_t id = 0;
  {
    RunWriter writer(path());
    id = writer.create_run(run_info("prompts"));
    writer.log_samples({at(10, 0, "a"), at(10, 1, "b"), at(10, 2, "c")});
    writer.log_samples({at(20, 0, "a"), at(20, 1, "b"), at(20, 2, "c")});
    writer.log_samples({at(20, 0, "x"), at(20, 1, "y")});
    writer.flush();
    // A step's samples are one step's, and bounded.
    EXPECT_THROW(writer.log_samples({at(30, 0, "a"), at(40, 1, "b")}), Error);
    EXPECT_THROW(writer.log_samples(std::vector<Sample>(kMaxSamplesPerStep + 1, at(50, 0, "a"))), Error);
  }
  auto db = open_store(path(), Access::ReadOnly);
  const auto all = list_samples(*db, id, 100);
  ASSERT_EQ(all.size(), 5u);
  const std::vector<std::pair<int64_t, std::string>> expected = {{10, "a"}, {10, "b"}, {10, "c"}, {20, "x"}, {20, "y"}};
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].step, expected[i].first);
    EXPECT_EQ(all[i].prompt, expected[i].second);
    EXPECT_EQ(all[i].text, " after " + expected[i].second);
  }
  // The newest two are step 20's; after step 10, only step 20's.
  const auto newest = list_samples(*db, id, 2);
  ASSERT_EQ(newest.size(), 2u);
  EXPECT_EQ(newest[0].slot, 0);
  EXPECT_EQ(newest[1].slot, 1);
  EXPECT_EQ(list_samples(*db, id, 100, 10).size(), 2u);
  const std::vector<Sample> latest = latest_samples(*db, id);
  ASSERT_EQ(latest.size(), 2u);
  EXPECT_EQ(latest[0].prompt, "x");
  EXPECT_EQ(latest[1].prompt, "y");
  EXPECT_EQ(latest[1].step, 20);
}

TEST_F(SampleQueriesTest, ModelTextIsStoredAsValidUtf8WithinItsBound) {
  int64_t id = 0;
  {
    RunWriter writer(path());
    id = writer.create_run(run_info("bytes"));
    // A token that ends inside a character, and a stray continuation byte.
    writer.log_samples({sample_at(1, std::string(" caf\xc3", 5) + " \x80ok")});
    writer.log_samples({sample_at(2, std::string(kMaxSampleBytes - 1, 'a') + "\xc3\xa9" + "tail")});
    writer.flush();
  }
  auto db = open_store(path(), Access::ReadOnly);
  const auto samples = list_samples(*db, id, 10);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].text, " caf\xef\xbf\xbd \xef\xbf\xbdok");
  // Cut before the two-byte character that would pass the bound, not inside it.
  EXPECT_EQ(samples[1].text, std::string(kMaxSampleBytes - 1, 'a'));
  EXPECT_TRUE(is_valid_utf8(samples[1].text));
}

TEST(StorableText, ReplacesBadBytesAndCutsAtACharacterBoundary) {
  EXPECT_EQ(storable_text("plain", 100), "plain");
  EXPECT_EQ(storable_text("\xe2\x82", 100), "\xef\xbf\xbd\xef\xbf\xbd") << "a sequence cut short";
  EXPECT_EQ(storable_text("ab\xe2\x82\xac", 4), "ab") << "the euro sign does not fit whole";
  EXPECT_EQ(storable_text("ab\xe2\x82\xac", 5), "ab\xe2\x82\xac");
  EXPECT_EQ(storable_text("", 0), "");
}

TEST_F(SampleQueriesTest, RemovingARunRemovesItsSamples) {
  int64_t id = 0;
  {
    RunWriter writer(path());
    id = writer.create_run(run_info("gone"));
    writer.log_samples({sample_at(5, " x")});
    writer.finish(RunStatus::Completed);
    writer.flush();
  }
  auto db = open_store(path(), Access::ReadWrite);
  remove_run(*db, id);
  EXPECT_EQ(db->query_int("SELECT count(*) FROM samples"), 0);
}

// Samples are records like validation rows: a stall thins them (a step's together), the newest
// kept and every sample lost counted in the dropped event.
TEST(SampleQueue, SamplesThinLikeOtherRecords) {
  WriteQueue q(64, 10);
  for (int64_t s = 0; s < 1000; ++s) {
    Sample second = sample_at(s, " u");
    second.slot = 1;
    q.push(SampleBatch{{sample_at(s, " t"), second}});
    ASSERT_LE(q.records(), 10u);
  }
  Batch b = q.take();
  int64_t kept = 0, last = -1;
  for (const auto& item : b.items)
    if (const auto* batch = std::get_if<SampleBatch>(&item)) kept += std::ssize(batch->samples), last = batch->samples[0].step;
  EXPECT_EQ(kept + b.dropped.samples, 2000);
  EXPECT_EQ(kept % 2, 0) << "a step's samples are kept or dropped together";
  EXPECT_EQ(last, 999);
  EXPECT_EQ(b.dropped.describe(), "dropped " + std::to_string(b.dropped.samples) + " samples: the store could not keep up");
}

}  // namespace
}  // namespace kiln::store
