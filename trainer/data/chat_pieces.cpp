#include "trainer/data/chat_pieces.h"

#include <optional>

#include "base/check.h"
#include "trainer/data/jinja_value.h"

namespace kiln {
namespace {

// Text no template writes of its own, so every occurrence in a render stands for a message.
constexpr std::string_view kMarkerOpen = "@@kiln-message-", kMarkerClose = "@@";

std::string marker(size_t message) {
  return std::string(kMarkerOpen) + std::to_string(message) + std::string(kMarkerClose);
}

// A render with markers, as template text and the message each marker stands for.
struct MarkedPart {
  std::string text;
  std::optional<size_t> message;
};

std::vector<MarkedPart> marked_parts(const std::string& render, size_t messages) {
  std::vector<MarkedPart> parts;
  size_t at = 0;
  while (true) {
    const size_t open = render.find(kMarkerOpen, at);
    if (open == std::string::npos) break;
    const size_t digits = open + kMarkerOpen.size();
    const size_t close = render.find(kMarkerClose, digits);
    KILN_CHECK(close != std::string::npos, "chat template: a message marker is cut short in the render");
    const size_t message = std::stoul(render.substr(digits, close - digits));
    KILN_CHECK(message < messages, "chat template: the render names a message that is not there");
    parts.push_back({render.substr(at, open - at), std::nullopt});
    parts.push_back({"", message});
    at = close + kMarkerClose.size();
  }
  parts.push_back({render.substr(at), std::nullopt});
  return parts;
}

std::vector<ChatMessage> with_markers(const std::vector<ChatMessage>& messages, size_t count) {
  std::vector<ChatMessage> marked;
  for (size_t i = 0; i < count; ++i) marked.push_back({messages[i].role, marker(i)});
  return marked;
}

// What the template writes after assistant reply `i` when it ends the conversation.
std::string end_of_turn(const ChatTemplate& chat_template, const std::vector<ChatMessage>& messages, size_t i,
                        const ChatTemplateOptions& options) {
  ChatTemplateOptions closed = options;
  closed.add_generation_prompt = false;
  const std::string render = chat_template.render(with_markers(messages, i + 1), closed);
  const size_t at = render.rfind(marker(i));
  return at == std::string::npos ? "" : render.substr(at + marker(i).size());
}

[[noreturn]] void shown_otherwise(const ChatMessage& message, size_t i) {
  fail("chat template: it shows message " + std::to_string(i + 1) + " (" + message.role +
       ") other than as written or trimmed, so its tokens cannot be told from the template's");
}

}  // namespace

std::vector<ChatPiece> chat_pieces(const ChatTemplate& chat_template, const std::vector<ChatMessage>& messages,
                                   const ChatTemplateOptions& options) {
  const std::string render = chat_template.render(messages, options);
  const std::vector<MarkedPart> parts =
      marked_parts(chat_template.render(with_markers(messages, messages.size()), options), messages.size());
  std::vector<ChatPiece> pieces;
  size_t at = 0;  // in render
  for (size_t k = 0; k < parts.size(); ++k) {
    const MarkedPart& part = parts[k];
    if (!part.message) {
      if (render.compare(at, part.text.size(), part.text) != 0)
        fail("chat template: it renders its own text differently when the messages change, so the turns "
             "cannot be told apart");
      if (!part.text.empty()) pieces.push_back({part.text, true, false});
      at += part.text.size();
      continue;
    }
    // The message as written, else trimmed (Llama 3's `| trim`), followed by the template's next text.
    const size_t i = *part.message;
    const ChatMessage& message = messages[i];
    const std::string& next = parts[k + 1].text;
    std::optional<std::string> shown;
    for (const std::string& text : {message.content, jinja::strip(message.content, nullptr, true, true)}) {
      if (render.compare(at, text.size(), text) == 0 && render.compare(at + text.size(), next.size(), next) == 0) {
        shown = text;
        break;
      }
    }
    if (!shown) shown_otherwise(message, i);
    const bool reply = message.role == "assistant";
    if (!shown->empty()) pieces.push_back({*shown, false, reply});
    at += shown->size();
    if (!reply) continue;
    // The end of the reply's turn is trained too: the model learns to stop.
    const std::string end = end_of_turn(chat_template, messages, i, options);
    if (!end.empty() && next.starts_with(end)) {
      pieces.push_back({end, true, true});
      at += end.size();
      if (next.size() > end.size()) pieces.push_back({next.substr(end.size()), true, false});
      at += next.size() - end.size();
      ++k;
    }
  }
  KILN_CHECK(at == render.size(), "chat template: the pieces do not cover the render");
  return pieces;
}

}  // namespace kiln
