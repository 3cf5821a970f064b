// What a Hugging Face tokenizer folder's tokenizer_config.json says about chat: the chat
// template (or the folder's chat_template.jinja, which transformers prefers when both exist)
// and the bos and eos token texts the template prints. `kiln data prepare --format chat`
// renders conversations with them (docs/finetune.md).
#pragma once

#include <string>

namespace kiln {

struct ChatTemplateSource {
  std::string text;   // the Jinja template
  std::string where;  // the file it came from, for messages
  std::string bos_token, eos_token;  // "" where the config names none
};

// The chat template for a tokenizer spec (a folder, or a tokenizer.json whose folder is read).
// `override_file` (--chat-template FILE), when set, replaces the template; bos and eos still
// come from tokenizer_config.json where there is one. A kiln::Error in one line when there is
// no template or a file is not what it should be.
ChatTemplateSource read_chat_template(const std::string& tokenizer_spec, const std::string& override_file);

}  // namespace kiln
