// Hugging Face's tokenizer.json, for byte-level BPE models: model.type "BPE" with its
// vocab and merges, a ByteLevel pre-tokenizer (GPT-2's regex) or a Split on a regex
// followed by ByteLevel without its own regex (Llama 3 style), the normalizer NFC (Qwen's),
// and added_tokens with their special flag. Anything else it holds that would change the ids
// (another normalizer, a prefix space, dropout, byte fallback, an added token's lstrip, rstrip
// or single_word) is refused by name rather than ignored.
#pragma once

#include <string>

#include "trainer/data/bpe_model.h"

namespace kiln {

// The end-of-document id is the first of <|endoftext|>, <|end_of_text|> and </s> among
// the added tokens (-1 when none is; load_tokenizer takes tokenizer_config.json's eos_token
// first). Throws kiln::Error naming the file and the field.
BpeModel read_hf_tokenizer_json(const std::string& path);

}  // namespace kiln
