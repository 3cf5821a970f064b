// Hugging Face's tokenizer.json, for byte-level BPE models: model.type "BPE" with its
// vocab and merges, a ByteLevel pre-tokenizer (GPT-2's regex) or a Split on a regex
// followed by ByteLevel without its own regex (Llama 3 style), and added_tokens
// as the special tokens. Anything else it holds that would change the ids (a
// normalizer, a prefix space, dropout, byte fallback) is refused by name rather than
// ignored.
#pragma once

#include <string>

#include "trainer/data/bpe_model.h"

namespace kiln {

// The end-of-document id is the first of <|endoftext|>, <|end_of_text|> and </s> among
// the added tokens. Throws kiln::Error naming the file and the field.
BpeModel read_hf_tokenizer_json(const std::string& path);

}  // namespace kiln
