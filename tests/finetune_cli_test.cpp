// End-to-end, through the real binary: conversations prepared with a chat template and a loss
// mask (kiln data prepare --format chat), and a fine-tune of an exported model on them (kiln
// finetune): only the replies train, the store records the trained tokens, the loss falls, and
// the reply to a fixed prompt is sampled at each evaluation (docs/finetune.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "store/metric_queries.h"
#include "store/run_queries.h"
#include "store/sample_queries.h"
#include "store/schema.h"
#include "tests/corpus_fixture.h"
#include "tests/run_command.h"

namespace kiln::test {
namespace {

const std::string kChats = std::string(KILN_SOURCE_DIR) + "/examples/chat/arithmetic.jsonl";
const std::string kChatml = std::string(KILN_SOURCE_DIR) + "/examples/chat/chatml.jinja";

TEST(ChatDataCli, PreparesConversationsWithTheirLossMask) {
  const std::string dir = fresh_dir("chat_data_cli");
  const CommandResult prep = run_command(kiln + " data prepare --input " + kChats + " --tokenizer byte --format chat" +
                                         " --chat-template " + kChatml + " --output " + dir + "/chats");
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  // 600 conversations; the replies and their <|im_end|>\n are 19520 of the bytes (the byte
  // tokenizer: a token a byte), which python3 counts from the same file below.
  EXPECT_NE(prep.output.find("600 documents"), std::string::npos) << prep.output;
  const CommandResult counted = run_command(
      "/usr/bin/python3 -c \"import json,sys; print(sum(len(m['content'].encode()) + len('<|im_end|>\\n') for l in "
      "open(sys.argv[1]) for m in json.loads(l)['messages'] if m['role'] == 'assistant'))\" " + kChats);
  ASSERT_EQ(counted.exit_code, 0) << counted.output;
  EXPECT_NE(prep.output.find(counted.output.substr(0, counted.output.size() - 1) + " of the "), std::string::npos)
      << prep.output << counted.output;
  EXPECT_TRUE(std::filesystem::exists(dir + "/chats.mask.idx"));
  const CommandResult inspect = run_command(kiln + " data inspect " + dir + "/chats --docs 1");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_NE(inspect.output.find("loss mask: " + counted.output.substr(0, counted.output.size() - 1) + " of "),
            std::string::npos)
      << inspect.output;
}

TEST(ChatDataCli, BadConversationsAreOneLineAndWriteNothing) {
  const std::string dir = fresh_dir("chat_data_bad");
  std::ofstream(dir + "/no-reply.jsonl") << R"({"messages": [{"role": "user", "content": "hi"}]})" << "\n";
  std::ofstream(dir + "/not-a-list.jsonl") << R"({"messages": "hi"})" << "\n";
  const std::string base = kiln + " data prepare --tokenizer byte --output " + dir + "/out --format chat";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --chat-template " + kChatml + " --input " + dir + "/no-reply.jsonl",
       "kiln: error: data prepare: " + dir + "/no-reply.jsonl:1: no assistant message, so nothing in it would be "
       "trained\n"},
      {" --chat-template " + kChatml + " --input " + dir + "/not-a-list.jsonl",
       "kiln: error: data prepare: " + dir + "/not-a-list.jsonl:1: \"messages\" must be a non-empty list of "
       "{\"role\", \"content\"} messages\n"},
      {" --input " + kChats,
       "kiln: error: chat template: the tokenizer byte has none (no chat_template in tokenizer_config.json, no "
       "chat_template.jinja); give one with --chat-template FILE\n"},
      {" --chat-template " + kChatml + " --json-key text --input " + kChats,
       "kiln: error: data prepare: --format chat reads one conversation a JSONL line; --json-key and "
       "--document-boundary are for --format text\n"}};
  for (const auto& [args, error] : cases) {
    const CommandResult r = run_command(base + args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_EQ(r.output, error) << args;
    EXPECT_FALSE(std::filesystem::exists(dir + "/out.idx")) << args;
  }
}

TEST(FinetuneCli, AnExportedModelLearnsTheRepliesOfChatData) {
  const std::string dir = fresh_dir("finetune_cli");
  const std::string store = dir + "/runs.db";
  // The base: a small Llama-style byte model, a few steps on the chats as plain text, exported.
  const CommandResult prep = run_command(kiln + " data prepare --input " + kChats + " --tokenizer byte --output " +
                                         dir + "/text");
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  const std::string model = " --set model.arch=llama --set model.n_layer=2 --set model.n_head=4 --set model.n_kv_head=2"
                            " --set model.d_model=64 --set model.vocab_size=257 --set model.seq_len=128"
                            " --set data.tokenizer=byte";
  const CommandResult base = run_command(kiln + " train --no-store --name base" + model + " --set 'data.paths=[\"" +
                                         dir + "/text\"]' --set data.split=100 --set train.steps=4" +
                                         " --set train.sample_tokens=0 --set train.checkpoint_dir=" + dir + "/ckpt");
  ASSERT_EQ(base.exit_code, 0) << base.output;
  const CommandResult exported = run_command(kiln + " export --checkpoint " + dir + "/ckpt/base -o " + dir + "/hf");
  ASSERT_EQ(exported.exit_code, 0) << exported.output;

  const CommandResult tuned = run_command(
      kiln + " finetune --model " + dir + "/hf --data " + kChats + " --chat-template " + kChatml + " --recipe " +
      KILN_SOURCE_DIR + "/configs/finetune-full.json --name tuned --checkpoint-dir " + dir + "/ckpt --store " + store +
      " --prompt 'What is 3 plus 4?' --prompt 'What is 9 minus 5?' --set train.steps=40 --set train.lr=0.003 --set train.eval_interval=20"
      " --set train.sample_tokens=16");
  ASSERT_EQ(tuned.exit_code, 0) << tuned.output;
  EXPECT_NE(tuned.output.find("kiln finetune: base: " + dir + "/hf (imported at " + dir + "/ckpt/tuned-base)"),
            std::string::npos)
      << tuned.output;
  EXPECT_NE(tuned.output.find("kiln finetune: chat template: " + kChatml), std::string::npos) << tuned.output;

  auto db = store::open_store(store, store::Access::ReadOnly);
  const int64_t run = store::resolve_run(*db, "tuned");
  std::vector<store::MetricRow> rows;
  store::for_each_metric(*db, run, [&](const store::MetricRow& r) { rows.push_back(r); });
  ASSERT_EQ(rows.size(), 4u);  // steps 10, 20, 30, 40
  for (const store::MetricRow& r : rows) {
    // Only replies train: about a quarter of the global batch's 16 x 128 tokens, never all.
    ASSERT_TRUE(r.trained_tokens.has_value());
    EXPECT_GT(*r.trained_tokens, 0);
    EXPECT_LT(*r.trained_tokens, 16 * 128 / 2);
  }
  // The measured curve goes from about 4.6 to under 1 by step 40 (docs/finetune.md); a half is
  // far inside that, and far outside what a run that did not learn would show.
  EXPECT_LT(rows.back().loss, 0.5 * rows.front().loss);
  // The reply to each prompt at each evaluation, the prompts rendered as the template asks.
  const std::vector<store::Sample> samples = store::list_samples(*db, run, 10);
  ASSERT_EQ(samples.size(), 4u);
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(samples[i].step, i < 2 ? 20 : 40);
    EXPECT_EQ(samples[i].slot, static_cast<int>(i % 2));
    EXPECT_EQ(samples[i].prompt, std::string("<|im_start|>user\n") + (i % 2 ? "What is 9 minus 5?" : "What is 3 plus 4?") +
                                     "<|im_end|>\n<|im_start|>assistant\n");
  }

  // The LoRA recipe on the same import and data: adapters train, the base stays frozen.
  const CommandResult lora = run_command(
      kiln + " finetune --model " + dir + "/hf --data " + dir + "/ckpt/tuned-data/conversations --chat-template " +
      kChatml + " --recipe " + KILN_SOURCE_DIR + "/configs/finetune-lora.json --name adapted --checkpoint-dir " + dir +
      "/ckpt --store " + store + " --set train.steps=40 --set train.lr=0.003 --set train.sample_tokens=0");
  ASSERT_EQ(lora.exit_code, 0) << lora.output;
  EXPECT_NE(lora.output.find("--set finetune.lora.rank=8"), std::string::npos) << lora.output;
  std::vector<store::MetricRow> adapted;
  store::for_each_metric(*db, store::resolve_run(*db, "adapted"),
                         [&](const store::MetricRow& r) { adapted.push_back(r); });
  ASSERT_EQ(adapted.size(), 4u);
  // Beside a base of four steps (its embedding and head frozen near their initial values) a
  // rank-8 adapter learns slowly: measured 5.02 at step 10 to 4.57 at step 40, a fall of 9%,
  // each logged step below the one before. A run that did not learn would not fall 5%.
  EXPECT_LT(adapted.back().loss, 0.95 * adapted.front().loss);
  EXPECT_NE(lora.output.find("the base frozen"), std::string::npos) << lora.output;
}

}  // namespace
}  // namespace kiln::test
