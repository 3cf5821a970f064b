#include "trainer/data/chat_encoder.h"

#include <fmt/core.h>

#include <ctime>

#include "base/check.h"
#include "trainer/data/chat_pieces.h"
#include "trainer/data/jsonl.h"
#include "trainer/data/tokenizer_config.h"

namespace kiln {
namespace {

ChatTemplate compiled_template(const ChatTemplateSource& source) {
  try {
    return ChatTemplate(source.text);
  } catch (const Error& e) {
    fail(source.where + ": " + e.what());
  }
}

std::tm today() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  return local;
}

}  // namespace

ChatEncoder::ChatEncoder(const ChatDataOptions& options, const std::string& tokenizer_spec, const Tokenizer& tokenizer)
    : ChatEncoder(options, read_chat_template(tokenizer_spec, options.chat_template_file), tokenizer) {}

ChatEncoder::ChatEncoder(const ChatDataOptions& options, const ChatTemplateSource& source, const Tokenizer& tokenizer)
    : options_(options), tokenizer_(tokenizer), template_(compiled_template(source)), template_source_(source.where) {
  render_.bos_token = source.bos_token;
  render_.eos_token = source.eos_token;
  render_.now = today();
}

std::vector<ChatMessage> ChatEncoder::messages_of(std::string_view line, const std::string& where,
                                                  uint64_t offset) const {
  nlohmann::json doc = jsonl_object(line, where, offset);
  std::vector<ChatMessage> messages;
  if (options_.format == "instruct") {
    if (doc.contains(options_.system_key) && !doc[options_.system_key].is_null()) {
      std::string system = jsonl_string(doc, options_.system_key, where);
      if (!system.empty()) messages.push_back({"system", std::move(system)});
    }
    messages.push_back({"user", jsonl_string(doc, options_.prompt_key, where)});
    messages.push_back({"assistant", jsonl_string(doc, options_.response_key, where)});
    return messages;
  }
  const auto list = doc.find(options_.messages_key);
  if (list == doc.end() || !list->is_array() || list->empty())
    fail(fmt::format("{}: \"{}\" must be a non-empty list of {{\"role\", \"content\"}} messages", where,
                     options_.messages_key));
  for (size_t i = 0; i < list->size(); ++i) {
    nlohmann::json& m = (*list)[i];
    const std::string at = fmt::format("{}: message {}", where, i + 1);
    if (!m.is_object()) fail(at + ": not a JSON object");
    std::string role = jsonl_string(m, "role", at);
    messages.push_back({std::move(role), jsonl_string(m, "content", at)});
  }
  bool replies = false;
  for (const ChatMessage& m : messages) replies = replies || m.role == "assistant";
  if (!replies) fail(where + ": no assistant message, so nothing in it would be trained");
  return messages;
}

std::string ChatEncoder::reply_prompt(const std::string& user_text) const {
  ChatTemplateOptions prompting = render_;
  prompting.add_generation_prompt = true;
  return template_.render({{"user", user_text}}, prompting);
}

void ChatEncoder::encode(std::string_view line, const std::string& where, uint64_t offset, std::vector<int32_t>& ids,
                         std::vector<uint8_t>& trained) const {
  std::vector<ChatPiece> pieces;
  try {
    pieces = chat_pieces(template_, messages_of(line, where, offset), render_);
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.starts_with(where)) throw;
    fail(where + ": " + what);
  }
  for (const ChatPiece& piece : pieces) {
    const size_t before = ids.size();
    // Only the template's own text may hold control tokens; a message's text is text.
    tokenizer_.encode(piece.text, ids, piece.from_template);
    trained.insert(trained.end(), ids.size() - before, piece.trained ? 1 : 0);
  }
}

}  // namespace kiln
