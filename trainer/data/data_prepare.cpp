#include "trainer/data/data_prepare.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string_view>

#include "base/check.h"
#include "trainer/data/document_segments.h"
#include "trainer/data/document_splitter.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/data/jsonl.h"
#include "trainer/data/loss_mask.h"
#include "trainer/data/ordered_pool.h"
#include "trainer/data/tokenizer.h"
#include "trainer/util/step_clock.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
constexpr size_t kReadChunk = size_t{1} << 20;     // bytes read from an input at a time
constexpr size_t kBatchBytes = size_t{256} << 10;  // text handed to a worker at a time

// Checks every input before anything is written, so a typo fails fast and leaves no files.
uint64_t check_inputs(const std::vector<std::string>& inputs) {
  if (inputs.empty()) fail("data prepare: no --input files given");
  uint64_t total = 0;
  for (const auto& path : inputs) {
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (ec || !fs::exists(st)) fail("data prepare: input " + path + " does not exist");
    if (fs::is_directory(st)) fail("data prepare: input " + path + " is a directory, not a file");
    if (::access(path.c_str(), R_OK) != 0) fail("data prepare: input " + path + " is not readable");
    if (fs::is_regular_file(st)) total += fs::file_size(path, ec);
  }
  return total;
}

void check_output(const std::string& output) {
  if (output.empty()) fail("data prepare: --output is empty; give a prefix such as data/corpus");
  for (const char* ext : {".bin", ".idx"}) {
    if (output.size() > 4 && output.ends_with(ext)) {
      fail("data prepare: --output " + output +
           " is a prefix: kiln writes PREFIX.bin and PREFIX.idx, so drop the " + ext);
    }
  }
  const fs::path parent = fs::path(output).parent_path();
  std::error_code ec;
  if (!parent.empty() && !fs::exists(parent, ec)) {
    fs::create_directories(parent, ec);
    if (ec)
      fail("data prepare: cannot create the output directory " + parent.string() + ": " +
           ec.message());
  }
}

void check_options(const DataPrepareOptions& options) {
  if (options.document_boundary != "file" && options.document_boundary != "blank-line")
    fail("data prepare: unknown --document-boundary \"" + options.document_boundary +
         "\" (file or blank-line)");
  if (!options.json_key.empty() && options.document_boundary != "file")
    fail(
        "data prepare: --document-boundary is for plain text; with --json-key every JSONL line "
        "is a document");
  const std::string& format = options.chat.format;
  if (format != "text" && format != "chat" && format != "instruct")
    fail("data prepare: unknown --format \"" + format + "\" (text, chat or instruct)");
  if (format != "text" && (!options.json_key.empty() || options.document_boundary != "file"))
    fail("data prepare: --format " + format +
         " reads one conversation a JSONL line; --json-key and --document-boundary are for --format text");
  if (format == "text" && !options.chat.chat_template_file.empty())
    fail("data prepare: --chat-template is for --format chat or instruct");
  if (options.workers < 1)
    fail("data prepare: --workers " + std::to_string(options.workers) + " must be at least 1");
}

// Reads a file in chunks; on_chunk(chunk, offset of its first byte).
void read_chunks(const std::string& path,
                 const std::function<void(std::string_view, uint64_t)>& on_chunk) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rbe"), &std::fclose);
  if (!f) fail("data prepare: cannot open input " + path + ": " + std::strerror(errno));
  std::string chunk(kReadChunk, '\0');
  uint64_t offset = 0;
  while (true) {
    const size_t n = std::fread(chunk.data(), 1, chunk.size(), f.get());
    if (n > 0) on_chunk(std::string_view(chunk.data(), n), offset);
    offset += n;
    if (n < chunk.size()) {
      if (std::ferror(f.get()))
        fail("data prepare: cannot read input " + path + ": " + std::strerror(errno));
      return;
    }
  }
}

}  // namespace

DataPrepareSummary prepare_dataset(const DataPrepareOptions& options, std::FILE* warnings,
                                   const std::function<void(const DataPrepareProgress&)>& progress) {
  const auto start = Clock::now();
  check_options(options);
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(options.tokenizer);
  const uint64_t total_bytes = check_inputs(options.inputs);
  if (options.json_key.empty() && options.chat.format == "text" && warnings != nullptr)
    warn_of_jsonl(options.inputs, "data prepare", "tokenized", warnings);
  check_output(options.output);

  const bool conversations = options.chat.format != "text";
  std::unique_ptr<ChatEncoder> chat;
  if (conversations) chat = std::make_unique<ChatEncoder>(options.chat, options.tokenizer, *tokenizer);
  IndexedDatasetWriter writer(options.output, tokenizer->vocab_size());
  std::unique_ptr<IndexedDatasetWriter> mask;
  if (conversations) mask = std::make_unique<IndexedDatasetWriter>(loss_mask_prefix(options.output), 2);
  // A conversation always ends with an EOD: packing resets attention and positions there.
  // A conversation's template writes its own begin-of-text; a text starts with the tokenizer's
  // when it adds one.
  DocumentWriter documents(writer, tokenizer->eod(), options.append_eod || conversations, mask.get(),
                           !conversations && tokenizer->adds_bos() ? tokenizer->bos() : -1);
  // Enough batches in flight to keep every worker busy while the oldest is written.
  OrderedPool<EncodedBatch> pool(options.workers, 2 * static_cast<size_t>(options.workers) + 2,
                                 [&](EncodedBatch& batch) { documents.write(batch); });
  const auto reading = Clock::now();
  DataPrepareSummary summary;
  const auto report = [&](bool finished) {
    if (progress)
      progress({static_cast<uint64_t>(summary.bytes), total_bytes, writer.num_documents(),
                writer.num_tokens(), seconds_since(reading), finished});
  };

  std::vector<Segment> batch;
  size_t batch_bytes = 0;
  const auto submit = [&] {
    if (batch.empty()) return;
    pool.submit([segments = std::move(batch), &tokenizer, &options, &chat] {
      return encode_batch(segments, *tokenizer, options.inputs, options.json_key, chat.get());
    });
    batch.clear();
    batch_bytes = 0;
  };
  const auto add = [&](Segment&& s) {
    batch_bytes += s.text.size();
    batch.push_back(std::move(s));
    if (batch_bytes >= kBatchBytes) submit();
  };

  SegmentBuilder segments(*tokenizer, options.inputs, add);
  BlankLineSplitter blank_lines(segments);
  size_t file = 0;
  JsonlLineSplitter jsonl([&](std::string_view line, int64_t number, uint64_t offset) {
    add({std::string(line), file, offset, number, true});
  });
  try {
    for (file = 0; file < options.inputs.size(); ++file) {
      segments.start_file(file);
      read_chunks(options.inputs[file], [&](std::string_view chunk, uint64_t offset) {
        if (!options.json_key.empty() || conversations) {
          jsonl.feed(chunk);
        } else if (options.document_boundary == "file") {
          segments.text(chunk, offset);
        } else {
          blank_lines.feed(chunk, offset);
        }
        summary.bytes += static_cast<int64_t>(chunk.size());
        report(false);
      });
      if (!options.json_key.empty() || conversations) {
        jsonl.end_file();
      } else if (options.document_boundary == "file") {
        segments.end_document();
      } else {
        blank_lines.end_file();
      }
    }
    submit();
  } catch (const Error&) {
    // An earlier batch may hold an earlier error: report the first in input order.
    pool.finish();
    throw;
  }
  pool.finish();
  report(true);
  if (writer.num_documents() == 0) {
    fail("data prepare: the inputs hold no text (" + std::to_string(options.inputs.size()) +
         " file(s), all empty or blank), so there is nothing to write");
  }
  // The mask first and the tokens' .idx last: a dataset is whole once its .idx is there. A mask
  // left by an earlier conversation dataset of the same prefix goes, or it would be read as this one's.
  if (mask) {
    mask->finish();
  } else {
    std::error_code ec;
    for (const char* ext : {".idx", ".bin"}) fs::remove(loss_mask_prefix(options.output) + ext, ec);
  }
  writer.finish();

  summary.documents = writer.num_documents();
  summary.empty_documents = documents.empty_documents();
  summary.tokens = writer.num_tokens();
  summary.seconds = seconds_since(start);
  summary.tokenizer = tokenizer->name();
  summary.bin_path = writer.bin_path();
  summary.idx_path = writer.idx_path();
  if (chat) {
    summary.trained_tokens = documents.trained_tokens();
    summary.mask_idx_path = mask->idx_path();
    summary.chat_template = chat->template_source();
  }
  return summary;
}

}  // namespace kiln
