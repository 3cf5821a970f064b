#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace kiln {

// kiln data prepare --input FILE... --tokenizer byte --output PREFIX
//                   [--append-eod] [--document-boundary file|blank-line]
// kiln data inspect PREFIX
void add_data_command(CLI::App& app);

struct DataPrepareOptions {
  std::vector<std::string> inputs;
  std::string tokenizer;                   // "byte" is the one there is
  std::string output;                      // writes OUTPUT.bin and OUTPUT.idx
  bool append_eod = false;                 // end every document with the EOD token
  std::string document_boundary = "file";  // file | blank-line
};

struct DataPrepareSummary {
  int64_t documents = 0;
  int64_t tokens = 0;
  int64_t bytes = 0;  // read from the inputs
  double seconds = 0.0;
};

// The handlers behind the subcommands, as plain functions. prepare writes its summary line
// to out and progress to err (only for inputs of 64 MiB or more); both throw kiln::Error.
DataPrepareSummary data_prepare(const DataPrepareOptions& options, std::FILE* out = stdout,
                                std::FILE* err = stderr);
void data_inspect(const std::string& prefix, std::FILE* out = stdout);

}  // namespace kiln
