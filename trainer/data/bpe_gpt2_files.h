// GPT-2's tokenizer files: vocab.json (a JSON object from each token, in GPT-2's
// printable byte form, to its id; OpenAI's encoder.json) and merges.txt (a
// "#version: 0.2" line, then one merge "left right" per line, in rank order; OpenAI's
// vocab.bpe). Hugging Face's GPT2Tokenizer reads and writes the same two files.
#pragma once

#include <string>

#include "trainer/data/bpe_model.h"

namespace kiln {

// Reads the two files. A vocab.json entry that is not a byte-level string, and
// <|endoftext|> (which must be there: it is the end-of-document id), become special
// tokens. Throws kiln::Error naming the file and, for merges.txt, the line.
BpeModel read_gpt2_files(const std::string& vocab_path, const std::string& merges_path);

// Writes DIR/vocab.json (ids in order) and DIR/merges.txt, creating DIR. Each file is
// written beside its final name and renamed onto it, so a reader never sees half of one.
void write_gpt2_files(const BpeModel& model, const std::string& dir);

}  // namespace kiln
