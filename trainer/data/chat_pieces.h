// A rendered conversation cut into the pieces `kiln data prepare --format chat` encodes and
// masks: the template's own text (its special tokens are control tokens), each message's text
// (never read as control tokens, so data cannot forge a turn), and which pieces are trained:
// the assistant's replies and the end of each reply's turn (its <|eot_id|>, <|im_end|>, </s>).
//
// The pieces are found by rendering the conversation a second time with each message's text
// replaced by a marker: what stays is the template's, what the markers stand in for is the
// messages', whatever the template does around them (Mistral's system text inside the last
// user turn, Qwen3's think block before the last reply). The end of a reply's turn is what the
// template writes after the reply when that reply ends the conversation. docs/finetune.md.
#pragma once

#include <string>
#include <vector>

#include "trainer/data/chat_template.h"

namespace kiln {

struct ChatPiece {
  std::string text;
  bool from_template = false;  // the template's text, not a message's
  bool trained = false;        // an assistant reply, or the end of its turn
};

// The pieces, whose texts joined are the rendered conversation. A kiln::Error in one line when
// the template shows a message's text other than as written (or trimmed), or when it raises.
std::vector<ChatPiece> chat_pieces(const ChatTemplate& chat_template, const std::vector<ChatMessage>& messages,
                                   const ChatTemplateOptions& options);

}  // namespace kiln
