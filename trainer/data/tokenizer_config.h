// What a Hugging Face tokenizer folder's tokenizer_config.json says: its special tokens (which
// the tokenizer takes its begin and end of document and its padding from, docs/tokenizers.md),
// and, for chat, the chat template (or the folder's chat_template.jinja, which transformers
// prefers when both exist) with the bos and eos token texts it prints. `kiln data prepare
// --format chat` renders conversations with them (docs/finetune.md).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kiln {

// The tokenizer_config.json beside a tokenizer spec (a folder, or a tokenizer.json whose folder
// is read), parsed (up to 16 MiB); null where there is none (and for the byte tokenizer); a
// kiln::Error in one line naming the file when it is not a JSON object.
nlohmann::json read_tokenizer_config(const std::string& tokenizer_spec);

// The texts of bos_token, eos_token and pad_token (each a string, an AddedToken object or null:
// "" for none) and add_bos_token.
struct SpecialTokenTexts {
  std::string bos, eos, pad;
  bool add_bos = false;
  std::string where;  // the tokenizer_config.json read; "" where the folder has none
};

// Those of the tokenizer_config.json beside a tokenizer spec (a folder, or a tokenizer.json
// whose folder is read); a kiln::Error in one line naming the file and the key when one is not
// what it should be.
SpecialTokenTexts read_special_token_texts(const std::string& tokenizer_spec);

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
