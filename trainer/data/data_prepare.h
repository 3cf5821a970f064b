// `kiln data prepare`'s pipeline: text or JSONL files tokenized into an indexed dataset
// (PREFIX.bin + PREFIX.idx, Megatron's format). The inputs are read a chunk at a time and cut
// into documents (trainer/data/document_splitter.h) and segments
// (trainer/data/document_segments.h); workers encode batches of segments and the writer
// takes them back in input order, so the output is the same for any number of workers and
// memory stays bounded however large the input. Every input and the output are checked
// before anything is written. The caller prints: each progress report as it comes, and the
// summary.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "trainer/data/chat_encoder.h"

namespace kiln {

struct DataPrepareOptions {
  std::vector<std::string> inputs;
  std::string tokenizer;                   // a spec for load_tokenizer: byte, DIR, tokenizer.json
  std::string output;                      // writes OUTPUT.bin and OUTPUT.idx
  bool append_eod = false;                 // end every document with the tokenizer's EOD id
  std::string document_boundary = "file";  // plain text: file | blank-line
  std::string json_key;                    // set: the inputs are JSONL, this key holds the text
  int workers = 1;                         // threads encoding documents
  // format chat or instruct: the inputs are JSONL conversations, rendered with the chat template
  // and written with their loss mask (PREFIX.mask.*) and an EOD after each.
  ChatDataOptions chat;
};

// How far the pipeline is: sent after each chunk read, and once more, finished, when every
// document is encoded and written (before the dataset's files are closed).
struct DataPrepareProgress {
  uint64_t bytes = 0;        // read from the inputs so far
  uint64_t total_bytes = 0;  // the inputs' sizes together
  int64_t documents = 0;     // written so far
  int64_t tokens = 0;
  double seconds = 0.0;  // since reading began
  bool finished = false;
};

struct DataPrepareSummary {
  int64_t documents = 0;
  int64_t empty_documents = 0;  // skipped: no text
  int64_t tokens = 0;
  int64_t bytes = 0;  // read from the inputs
  double seconds = 0.0;
  std::string tokenizer;  // its name, as load_tokenizer gave it
  std::string bin_path, idx_path;
  // Conversations: the tokens trained on (assistant replies and their turns' ends), the mask's
  // .idx, and where the chat template came from.
  int64_t trained_tokens = 0;
  std::string mask_idx_path;
  std::string chat_template;
};

// Runs the pipeline. An input that looks like JSONL read as plain text gets one warning line
// on `warnings` (nullptr: none); `progress` (may be empty) hears DataPrepareProgress. Bad
// options, inputs or text are a kiln::Error ("data prepare: ..."), the first in input order.
DataPrepareSummary prepare_dataset(const DataPrepareOptions& options, std::FILE* warnings,
                                   const std::function<void(const DataPrepareProgress&)>& progress);

}  // namespace kiln
