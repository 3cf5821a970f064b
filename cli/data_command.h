// kiln data prepare and kiln data inspect: their options, the progress and summary lines, and
// a dataset's counts, length histogram and first documents as text.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <string>

#include "trainer/data/data_prepare.h"

namespace kiln {

// kiln data prepare --input FILE... --tokenizer SPEC --output PREFIX [--append-eod]
//                   [--document-boundary file|blank-line | --json-key KEY] [--workers N]
// kiln data inspect PREFIX [--tokenizer SPEC] [--docs N]
void add_data_command(CLI::App& app);

struct DataInspectOptions {
  std::string tokenizer;  // decodes the documents shown; empty: bytes when they look like bytes
  int64_t docs = 1;       // how many documents to show, from the first
};

// The handlers behind the subcommands, as plain functions. prepare runs the pipeline
// (trainer/data/data_prepare.h) and writes its summary line to out, and its warnings and a
// progress line to err (for runs that take more than a moment); both throw kiln::Error.
DataPrepareSummary data_prepare(const DataPrepareOptions& options, std::FILE* out = stdout,
                                std::FILE* err = stderr);
void data_inspect(const std::string& prefix, const DataInspectOptions& options = {},
                  std::FILE* out = stdout);

}  // namespace kiln
