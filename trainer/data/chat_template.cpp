// A chat template compiled once and rendered per conversation (see chat_template.h).
#include "trainer/data/chat_template.h"

#include "trainer/data/jinja_parser.h"
#include "trainer/data/jinja_render.h"

namespace kiln {

ChatTemplate::ChatTemplate(const std::string& text)
    : compiled_(std::make_shared<const jinja::Template>(jinja::parse(text))) {}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, const ChatTemplateOptions& options) const {
  using jinja::Value;
  jinja::List conversation;
  for (const auto& m : messages) {
    jinja::Dict message;
    message.set("role", Value::of(m.role));
    message.set("content", Value::of(m.content));
    conversation.push_back(Value::of(std::move(message)));
  }
  jinja::RenderInput input;
  // What apply_chat_template passes: tools and documents are None when there are none.
  input.variables = {{"messages", Value::of(std::move(conversation))},
                     {"tools", Value::none()},
                     {"documents", Value::none()},
                     {"add_generation_prompt", Value::of(options.add_generation_prompt)},
                     {"bos_token", Value::of(options.bos_token)},
                     {"eos_token", Value::of(options.eos_token)}};
  for (const auto& [name, variable] : options.variables)
    input.variables.emplace_back(name, std::visit([](const auto& v) { return Value::of(v); }, variable));
  if (options.now) {
    input.now = *options.now;
  } else {
    const std::time_t t = std::time(nullptr);
    localtime_r(&t, &input.now);
  }
  return jinja::render(*compiled_, input);
}

std::string render_chat_template(const std::string& text, const std::vector<ChatMessage>& messages,
                                 const ChatTemplateOptions& options) {
  return ChatTemplate(text).render(messages, options);
}

}  // namespace kiln
