// A model's chat template (the Jinja `chat_template` of its tokenizer_config.json) turned into
// text for a conversation, as transformers' apply_chat_template(tokenize=False) renders it.
// The subset of Jinja that Llama 3, Qwen2.5, Qwen3 and Mistral templates use is supported
// (docs/chat-templates.md); anything else is refused when the template is compiled.
#pragma once

#include <cstdint>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace kiln {

namespace jinja {
struct Template;
}

struct ChatMessage {
  std::string role;  // system, user, assistant, ...
  std::string content;
};

struct ChatTemplateOptions {
  bool add_generation_prompt = false;
  std::string bos_token;
  std::string eos_token;
  // Further variables the template reads, such as Qwen3's enable_thinking (a bool).
  std::map<std::string, std::variant<bool, std::int64_t, std::string>> variables;
  // The date strftime_now() formats (Llama 3 prints "Today Date"); unset: the local time now.
  std::optional<std::tm> now;
};

class ChatTemplate {
 public:
  // Parses once; a kiln::Error "chat template line N: ..." names a construct it does not support.
  explicit ChatTemplate(const std::string& text);
  // A kiln::Error when the template raises (its raise_exception message, as it is) or fails.
  std::string render(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& options) const;

 private:
  std::shared_ptr<const jinja::Template> compiled_;
};

std::string render_chat_template(const std::string& text, const std::vector<ChatMessage>& messages,
                                 const ChatTemplateOptions& options);

}  // namespace kiln
