// `kiln data prepare --format chat|instruct`: one JSONL line, a conversation, rendered with
// the model's chat template (trainer/data/chat_pieces.h) and encoded into ids and, per id,
// whether it is trained (an assistant reply or the end of its turn). docs/finetune.md.
//   chat      {"messages": [{"role": "system"|"user"|"assistant"|..., "content": "..."}, ...]}
//   instruct  {"prompt": "...", "response": "...", "system": "..."}: the keys are options, the
//             system text optional; it becomes [system,] user, assistant
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/data/chat_template.h"
#include "trainer/data/tokenizer.h"
#include "trainer/data/tokenizer_config.h"

namespace kiln {

struct ChatDataOptions {
  std::string format = "text";     // text (not a conversation) | chat | instruct
  std::string chat_template_file;  // set: replaces the tokenizer's template (--chat-template)
  std::string messages_key = "messages";
  std::string prompt_key = "prompt", response_key = "response", system_key = "system";
};

class ChatEncoder {
 public:
  // Reads the chat template of the tokenizer spec (trainer/data/tokenizer_config.h). The
  // date a template prints (Llama 3's "Today Date") is today's, the same for every line.
  ChatEncoder(const ChatDataOptions& options, const std::string& tokenizer_spec, const Tokenizer& tokenizer);

  // Appends one line's ids and their trained flags (1: trained). `where` is "FILE:LINE" for the
  // one-line error; `offset` the line's first byte in its file. Safe from several threads.
  void encode(std::string_view line, const std::string& where, uint64_t offset, std::vector<int32_t>& ids,
              std::vector<uint8_t>& trained) const;

  // A user's message rendered as the template prompts a reply (add_generation_prompt): what a
  // fine-tuned model is sampled from.
  std::string reply_prompt(const std::string& user_text) const;

  // Where the template came from (tokenizer_config.json, chat_template.jinja or --chat-template).
  const std::string& template_source() const { return template_source_; }

 private:
  ChatEncoder(const ChatDataOptions& options, const ChatTemplateSource& source, const Tokenizer& tokenizer);
  std::vector<ChatMessage> messages_of(std::string_view line, const std::string& where, uint64_t offset) const;

  ChatDataOptions options_;
  const Tokenizer& tokenizer_;
  ChatTemplate template_;
  ChatTemplateOptions render_;
  std::string template_source_;
};

}  // namespace kiln
