#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace kiln {

// kiln data prepare --input FILE... --tokenizer SPEC --output PREFIX [--append-eod]
//                   [--document-boundary file|blank-line | --json-key KEY] [--workers N]
// kiln data inspect PREFIX [--tokenizer SPEC] [--docs N]
void add_data_command(CLI::App& app);

struct DataPrepareOptions {
  std::vector<std::string> inputs;
  std::string tokenizer;                   // a spec for load_tokenizer: byte, DIR, tokenizer.json
  std::string output;                      // writes OUTPUT.bin and OUTPUT.idx
  bool append_eod = false;                 // end every document with the tokenizer's EOD id
  std::string document_boundary = "file";  // plain text: file | blank-line
  std::string json_key;                    // set: the inputs are JSONL, this key holds the text
  int workers = 1;                         // threads encoding documents
};

struct DataPrepareSummary {
  int64_t documents = 0;
  int64_t empty_documents = 0;  // skipped: no text
  int64_t tokens = 0;
  int64_t bytes = 0;  // read from the inputs
  double seconds = 0.0;
};

struct DataInspectOptions {
  std::string tokenizer;  // decodes the documents shown; empty: bytes when they look like bytes
  int64_t docs = 1;       // how many documents to show, from the first
};

// The handlers behind the subcommands, as plain functions. prepare writes its summary line
// to out and a progress line to err (for runs that take more than a moment); both throw
// kiln::Error.
DataPrepareSummary data_prepare(const DataPrepareOptions& options, std::FILE* out = stdout,
                                std::FILE* err = stderr);
void data_inspect(const std::string& prefix, const DataInspectOptions& options = {},
                  std::FILE* out = stdout);

}  // namespace kiln
