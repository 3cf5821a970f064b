// A rendered conversation cut into the template's text, the messages' text and the trained
// pieces, with the chat templates of tests/chat_templates (Llama 3, Qwen2.5, Qwen3, Mistral).
#include "trainer/data/chat_pieces.h"

#include <gtest/gtest.h>

#include "tests/error_of.h"
#include "tests/test_files.h"

namespace kiln {
namespace {

ChatTemplate family_template(const std::string& family) {
  return ChatTemplate(test::text_of(std::string(KILN_SOURCE_DIR) + "/tests/chat_templates/" + family + ".jinja"));
}

const std::vector<ChatMessage> kTwoTurns = {{"system", "Be brief."},
                                            {"user", "Hi <|im_start|>"},
                                            {"assistant", "Hello!"},
                                            {"user", "2+2?"},
                                            {"assistant", " 4 "}};

std::string pieces_text(const std::vector<ChatPiece>& pieces) {
  std::string out;
  for (const ChatPiece& p : pieces) out += p.text;
  return out;
}

std::vector<std::string> trained_texts(const std::vector<ChatPiece>& pieces) {
  std::vector<std::string> out;
  for (const ChatPiece& p : pieces)
    if (p.trained) out.push_back(p.text);
  return out;
}

// The messages' own text, which is never read as control tokens.
std::vector<std::string> message_text(const std::vector<ChatPiece>& pieces) {
  std::vector<std::string> out;
  for (const ChatPiece& p : pieces)
    if (!p.from_template) out.push_back(p.text);
  return out;
}

ChatTemplateOptions options_with(const std::string& bos, const std::string& eos) {
  ChatTemplateOptions options;
  options.bos_token = bos;
  options.eos_token = eos;
  options.now = std::tm{};
  options.now->tm_year = 126;
  options.now->tm_mon = 10;
  options.now->tm_mday = 28;
  return options;
}

TEST(ChatPieces, QwenTrainsEachReplyAndItsEndOfTurn) {
  const ChatTemplate qwen = family_template("qwen2.5");
  const ChatTemplateOptions options = options_with("", "<|im_end|>");
  const std::vector<ChatPiece> pieces = chat_pieces(qwen, kTwoTurns, options);
  EXPECT_EQ(pieces_text(pieces), qwen.render(kTwoTurns, options));
  EXPECT_EQ(trained_texts(pieces), (std::vector<std::string>{"Hello!", "<|im_end|>\n", " 4 ", "<|im_end|>\n"}));
  // The user's "<|im_start|>" is the user's text, not the template's control token.
  EXPECT_EQ(message_text(pieces), (std::vector<std::string>{"Be brief.", "Hi <|im_start|>", "Hello!", "2+2?", " 4 "}));
}

TEST(ChatPieces, Llama3TrimsTheRepliesAndTrainsEotId) {
  const ChatTemplate llama = family_template("llama3");
  const ChatTemplateOptions options = options_with("<|begin_of_text|>", "<|eot_id|>");
  const std::vector<ChatPiece> pieces = chat_pieces(llama, kTwoTurns, options);
  EXPECT_EQ(pieces_text(pieces), llama.render(kTwoTurns, options));
  EXPECT_EQ(trained_texts(pieces), (std::vector<std::string>{"Hello!", "<|eot_id|>", "4", "<|eot_id|>"}));
}

TEST(ChatPieces, Qwen3KeepsTheThinkBlockOfTheLastReplyAsContext) {
  const ChatTemplate qwen3 = family_template("qwen3");
  const ChatTemplateOptions options = options_with("", "<|im_end|>");
  const std::vector<ChatPiece> pieces = chat_pieces(qwen3, kTwoTurns, options);
  EXPECT_EQ(pieces_text(pieces), qwen3.render(kTwoTurns, options));
  EXPECT_EQ(trained_texts(pieces), (std::vector<std::string>{"Hello!", "<|im_end|>\n", " 4 ", "<|im_end|>\n"}));
  EXPECT_NE(pieces_text(pieces).find("<think>\n\n</think>\n\n 4 "), std::string::npos);
}

TEST(ChatPieces, MistralTrainsTheEosAfterEachReply) {
  const ChatTemplate mistral = family_template("mistral");
  const ChatTemplateOptions options = options_with("<s>", "</s>");
  const std::vector<ChatMessage> conversation = {{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "2+2?"},
                                                 {"assistant", "4"}};
  const std::vector<ChatPiece> pieces = chat_pieces(mistral, conversation, options);
  EXPECT_EQ(pieces_text(pieces), "<s>[INST]Hi[/INST]Hello!</s>[INST]2+2?[/INST]4</s>");
  EXPECT_EQ(trained_texts(pieces), (std::vector<std::string>{"Hello!", "</s>", "4", "</s>"}));
}

TEST(ChatPieces, ATemplateThatRewritesAMessageIsRefused) {
  const ChatTemplate rewrites("{% for m in messages %}<{{ m.role }}>{{ m.content.strip('h') }}{% endfor %}");
  EXPECT_EQ(test::error_of([&] { chat_pieces(rewrites, {{"user", "hi"}, {"assistant", "yo"}}, {}); }),
            "chat template: it shows message 1 (user) other than as written or trimmed, so its tokens cannot be "
            "told from the template's");
}

}  // namespace
}  // namespace kiln
