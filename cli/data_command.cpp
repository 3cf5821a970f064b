#include "cli/data_command.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string_view>
#include <thread>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/human_format.h"
#include "base/utf8.h"
#include "trainer/data/byte_tokenizer.h"
#include "trainer/data/document_splitter.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/data/jsonl.h"
#include "trainer/data/ordered_pool.h"
#include "trainer/data/tokenizer.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunk = size_t{1} << 20;  // bytes read from an input at a time
constexpr size_t kSegmentBytes = size_t{1}
                                 << 20;        // a long document is encoded in pieces of about this
constexpr size_t kMaxHeld = size_t{64} << 20;  // ... and cut here even with no safe place to cut
constexpr size_t kBatchBytes = size_t{256} << 10;  // text handed to a worker at a time

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A stretch of input for a worker: all or part of a document's text, or one JSONL line.
struct Segment {
  std::string text;
  size_t file = 0;      // index into the inputs
  uint64_t offset = 0;  // where text starts in the file, in bytes
  int64_t line = 0;     // JSONL: the line number
  bool ends_document = false;
};

struct EncodedSegment {
  size_t ids = 0;
  bool ends_document = false;
};

struct EncodedBatch {
  std::vector<int32_t> ids;
  std::vector<EncodedSegment> segments;
};

// Text from `path` starting at byte `offset` of it was not UTF-8.
[[noreturn]] void not_utf8(const std::string& path, uint64_t offset, const InvalidUtf8& e,
                           const Tokenizer& tokenizer) {
  fail(fmt::format("data prepare: {}: not valid UTF-8 at byte {} (0x{:02x}); tokenizer {} reads "
                   "UTF-8 text only",
                   path, offset + e.offset, e.byte, tokenizer.name()));
}

// A worker's job: the ids of each segment of a batch, in order.
EncodedBatch encode_batch(const std::vector<Segment>& batch, const Tokenizer& tokenizer,
                          const DataPrepareOptions& options) {
  EncodedBatch out;
  out.segments.reserve(batch.size());
  for (const Segment& s : batch) {
    const size_t before = out.ids.size();
    const std::string& path = options.inputs[s.file];
    if (options.json_key.empty()) {
      try {
        tokenizer.encode(s.text, out.ids);
      } catch (const InvalidUtf8& e) {
        not_utf8(path, s.offset, e, tokenizer);
      }
    } else {
      const std::string where = fmt::format("data prepare: {}:{}", path, s.line);
      tokenizer.encode(jsonl_text(s.text, options.json_key, where, s.offset), out.ids);
    }
    out.segments.push_back({out.ids.size() - before, s.ends_document});
  }
  return out;
}

// Writes encoded batches as they come back in order: a document's ids, then its EOD.
// A document with no ids is skipped and counted.
class DocumentWriter {
 public:
  DocumentWriter(IndexedDatasetWriter& writer, int32_t eod, bool append_eod)
      : writer_(writer), eod_(eod), append_eod_(append_eod) {}

  void write(const EncodedBatch& batch) {
    size_t at = 0;
    for (const EncodedSegment& s : batch.segments) {
      if (s.ids > 0) {
        writer_.add_tokens(std::span<const int32_t>(batch.ids.data() + at, s.ids));
        has_tokens_ = true;
      }
      at += s.ids;
      if (!s.ends_document) continue;
      if (!has_tokens_) {
        ++empty_;
        continue;
      }
      if (append_eod_) writer_.add_tokens(std::span<const int32_t>(&eod_, 1));
      writer_.end_document();
      has_tokens_ = false;
    }
  }

  int64_t empty_documents() const { return empty_; }

 private:
  IndexedDatasetWriter& writer_;
  int32_t eod_;
  bool append_eod_;
  bool has_tokens_ = false;
  int64_t empty_ = 0;
};

// Turns the documents of plain-text files into segments: a document is held until it
// ends, or, when long, cut where the tokenizer says the ids before the cut are final.
class SegmentBuilder : public DocumentSink {
 public:
  SegmentBuilder(const Tokenizer& tokenizer, const std::vector<std::string>& inputs,
                 std::function<void(Segment&&)> emit)
      : tokenizer_(tokenizer), inputs_(inputs), emit_(std::move(emit)) {}

  void start_file(size_t file) { file_ = file; }

  void text(std::string_view piece, uint64_t offset) override {
    if (held_.empty()) held_offset_ = offset;
    held_.append(piece);
    if (held_.size() >= cut_at_) cut();
  }

  void end_document() override {
    emit_({std::move(held_), file_, held_offset_, 0, true});
    held_.clear();
    cut_at_ = kSegmentBytes;
  }

 private:
  void cut() {
    size_t n = 0;
    try {
      n = tokenizer_.stable_prefix(held_);
    } catch (const InvalidUtf8& e) {
      not_utf8(inputs_[file_], held_offset_, e, tokenizer_);
    }
    if (n == 0 && held_.size() >= kMaxHeld) n = utf8_complete_prefix(held_);
    if (n > 0) {
      emit_({held_.substr(0, n), file_, held_offset_, 0, false});
      held_.erase(0, n);
      held_offset_ += n;
    }
    // Not before another segment's worth arrives, so a long stretch with no place to cut
    // is scanned once per segment, not once per byte.
    cut_at_ = held_.size() + kSegmentBytes;
  }

  const Tokenizer& tokenizer_;
  const std::vector<std::string>& inputs_;
  std::function<void(Segment&&)> emit_;
  size_t file_ = 0;
  std::string held_;
  uint64_t held_offset_ = 0;
  size_t cut_at_ = kSegmentBytes;
};

// The progress line on stderr: redrawn in place on a terminal, a new line every few
// seconds in a log; nothing for a run that ends before the first.
class Progress {
 public:
  Progress(std::FILE* err, uint64_t total_bytes)
      : err_(err),
        total_(total_bytes),
        tty_(err != nullptr && ::isatty(::fileno(err)) == 1),
        start_(Clock::now()),
        last_(start_) {}

  void update(uint64_t bytes, int64_t documents, int64_t tokens) {
    if (err_ == nullptr) return;
    const auto now = Clock::now();
    if (now - last_ < std::chrono::milliseconds(tty_ ? 500 : 5000)) return;
    last_ = now;
    const double s = std::max(seconds_since(start_), 1e-9);
    fmt::print(
        err_,
        "{}data prepare: {} of {} ({:.0f}%), {}/s, {:.0f} documents/s, {:.0f} tokens/s; "
        "{} documents, {} tokens{}",
        tty_ ? "\r" : "", human_bytes(bytes), human_bytes(total_),
        total_ > 0 ? 100.0 * static_cast<double>(bytes) / static_cast<double>(total_) : 100.0,
        human_bytes(static_cast<uint64_t>(static_cast<double>(bytes) / s)),
        static_cast<double>(documents) / s, static_cast<double>(tokens) / s, documents, tokens,
        tty_ ? "\x1b[K" : "\n");
    std::fflush(err_);
    drawn_ = true;
  }

  void done() {
    if (drawn_ && tty_) fmt::print(err_, "\n");
  }

 private:
  std::FILE* err_;
  uint64_t total_;
  bool tty_;
  Clock::time_point start_, last_;
  bool drawn_ = false;
};

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

// Makes control bytes visible in a one-line preview.
std::string escaped(std::string_view text) {
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out.push_back(ch);
  }
  return out;
}

// The text of ids as a quoted line: control bytes escaped, the EOD as <eod>, and a UTF-8
// character that the cut at the end left incomplete dropped.
std::string preview(const Tokenizer& tokenizer, std::span<const int32_t> ids, bool truncated) {
  std::string text;
  size_t run = 0;  // where the text since the last EOD starts
  for (size_t i = 0; i <= ids.size(); ++i) {
    if (i < ids.size() && ids[i] != tokenizer.eod()) continue;
    text += escaped(tokenizer.decode(ids.subspan(run, i - run)));
    if (i < ids.size()) text += "<eod>";
    run = i + 1;
  }
  if (truncated) text.resize(utf8_complete_prefix(text));
  return "\"" + text + "\"" + (truncated ? "..." : "");
}

// Documents by length, in powers of two.
void print_histogram(const IndexedDataset& ds, std::FILE* out) {
  std::vector<int64_t> buckets(64);  // bucket 0: empty; k >= 1: [2^(k-1), 2^k)
  for (int64_t d = 0; d < ds.num_documents(); ++d) {
    const auto [begin, end] = ds.document_tokens(d);
    const auto length = static_cast<uint64_t>(end - begin);
    ++buckets[static_cast<size_t>(std::bit_width(length))];
  }
  size_t first = 0, last = buckets.size() - 1;
  while (buckets[first] == 0) ++first;
  while (buckets[last] == 0) --last;
  const int64_t most = *std::max_element(buckets.begin(), buckets.end());
  const auto range = [](size_t k) {
    return k == 0 ? std::string("0")
                  : fmt::format("{}-{}", int64_t{1} << (k - 1), (int64_t{1} << k) - 1);
  };
  const size_t width = range(last).size();
  fmt::print(out, "documents by length (tokens):\n");
  for (size_t k = first; k <= last; ++k) {
    const auto bar = static_cast<size_t>((buckets[k] * 40 + most - 1) / most);
    fmt::print(out, "  {:>{}} {:>9} {}\n", range(k), width, buckets[k], std::string(bar, '#'));
  }
}

}  // namespace

DataPrepareSummary data_prepare(const DataPrepareOptions& options, std::FILE* out, std::FILE* err) {
  const auto start = Clock::now();
  check_options(options);
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(options.tokenizer);
  const uint64_t total_bytes = check_inputs(options.inputs);
  if (options.json_key.empty()) warn_of_jsonl(options.inputs, "data prepare", "tokenized", err);
  check_output(options.output);

  IndexedDatasetWriter writer(options.output, tokenizer->vocab_size());
  DocumentWriter documents(writer, tokenizer->eod(), options.append_eod);
  // Enough batches in flight to keep every worker busy while the oldest is written.
  OrderedPool<EncodedBatch> pool(options.workers, 2 * static_cast<size_t>(options.workers) + 2,
                                 [&](EncodedBatch& batch) { documents.write(batch); });
  Progress progress(err, total_bytes);

  std::vector<Segment> batch;
  size_t batch_bytes = 0;
  const auto submit = [&] {
    if (batch.empty()) return;
    pool.submit([segments = std::move(batch), &tokenizer, &options] {
      return encode_batch(segments, *tokenizer, options);
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
  DataPrepareSummary summary;
  try {
    for (file = 0; file < options.inputs.size(); ++file) {
      segments.start_file(file);
      read_chunks(options.inputs[file], [&](std::string_view chunk, uint64_t offset) {
        if (!options.json_key.empty()) {
          jsonl.feed(chunk);
        } else if (options.document_boundary == "file") {
          segments.text(chunk, offset);
        } else {
          blank_lines.feed(chunk, offset);
        }
        summary.bytes += static_cast<int64_t>(chunk.size());
        progress.update(static_cast<uint64_t>(summary.bytes), writer.num_documents(),
                        writer.num_tokens());
      });
      if (!options.json_key.empty()) {
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
  progress.done();
  if (writer.num_documents() == 0) {
    fail("data prepare: the inputs hold no text (" + std::to_string(options.inputs.size()) +
         " file(s), all empty or blank), so there is nothing to write");
  }
  writer.finish();

  summary.documents = writer.num_documents();
  summary.empty_documents = documents.empty_documents();
  summary.tokens = writer.num_tokens();
  summary.seconds = seconds_since(start);
  if (out != nullptr) {
    fmt::print(out,
               "data prepare: {} documents{}, {} tokens from {} bytes in {:.2f} s ({}/s, {} "
               "worker{}, tokenizer {}) -> {}, {}\n",
               summary.documents,
               summary.empty_documents > 0
                   ? fmt::format(" ({} empty skipped)", summary.empty_documents)
                   : std::string(),
               summary.tokens, summary.bytes, summary.seconds,
               human_bytes(static_cast<uint64_t>(static_cast<double>(summary.bytes) /
                                                 std::max(summary.seconds, 1e-9))),
               options.workers, options.workers == 1 ? "" : "s", tokenizer->name(),
               writer.bin_path(), writer.idx_path());
    std::fflush(out);
  }
  return summary;
}

void data_inspect(const std::string& prefix, const DataInspectOptions& options, std::FILE* out) {
  if (options.docs < 0)
    fail("data inspect: --docs " + std::to_string(options.docs) + " must be >= 0");
  const std::unique_ptr<Tokenizer> tokenizer =
      options.tokenizer.empty() ? nullptr : load_tokenizer(options.tokenizer);
  const IndexedDataset ds(prefix);
  std::error_code ec;
  fmt::print(out, "{}: {} documents, {} sequences, {} tokens, dtype {} (code {})\n", prefix,
             ds.num_documents(), ds.num_sequences(), ds.num_tokens(),
             indexed_dtype::name(ds.dtype_code()), ds.dtype_code());
  fmt::print(out, "files: {}.bin ({}), {}.idx ({})\n", prefix,
             human_bytes(fs::file_size(prefix + ".bin", ec)), prefix,
             human_bytes(fs::file_size(prefix + ".idx", ec)));
  if (ds.num_documents() == 0) {
    fmt::print(out, "no documents\n");
    return;
  }
  int64_t shortest = std::numeric_limits<int64_t>::max(), longest = 0;
  for (int64_t d = 0; d < ds.num_documents(); ++d) {
    const auto [begin, end] = ds.document_tokens(d);
    shortest = std::min(shortest, end - begin);
    longest = std::max(longest, end - begin);
  }
  fmt::print(out, "document length (tokens): min {}, mean {:.1f}, max {}\n", shortest,
             static_cast<double>(ds.num_tokens()) / static_cast<double>(ds.num_documents()),
             longest);
  print_histogram(ds, out);

  constexpr int64_t kShown = 200;  // tokens shown of each document
  const ByteTokenizer bytes;
  for (int64_t d = 0; d < std::min(options.docs, ds.num_documents()); ++d) {
    const auto [begin, end] = ds.document_tokens(d);
    const int64_t n = std::min(end - begin, kShown);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    ds.read(begin, n, ids.data());
    const bool truncated = end - begin > n;
    if (tokenizer) {
      for (const int32_t id : ids)
        if (id < 0 || id >= tokenizer->vocab_size())
          fail(
              fmt::format("data inspect: document {} of {} holds id {}, outside the {} ids of "
                          "tokenizer {}",
                          d, prefix, id, tokenizer->vocab_size(), tokenizer->name()));
      fmt::print(out, "document {} ({} tokens): {}\n", d, end - begin,
                 preview(*tokenizer, ids, truncated));
      continue;
    }
    const bool bytes_only = std::all_of(
        ids.begin(), ids.end(), [](int32_t id) { return id >= 0 && id <= ByteTokenizer::kEod; });
    if (bytes_only) {
      fmt::print(out, "document {} ({} tokens, as bytes): {}\n", d, end - begin,
                 preview(bytes, ids, truncated));
    } else {
      // Ids past the byte tokenizer's and no tokenizer named: show ids, not text.
      std::string shown;
      for (size_t i = 0; i < std::min<size_t>(ids.size(), 20); ++i)
        shown += (i ? ", " : "") + std::to_string(ids[i]);
      fmt::print(out, "document {} ({} tokens, ids; --tokenizer decodes them): [{}{}]\n", d,
                 end - begin, shown, end - begin > 20 ? ", ..." : "");
    }
  }
}

void add_data_command(CLI::App& app) {
  CLI::App* data =
      app.add_subcommand("data", "Prepare and inspect token datasets (Megatron .bin + .idx)");
  data->require_subcommand(1);

  auto prepare_options = std::make_shared<DataPrepareOptions>();
  prepare_options->workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  CLI::App* prepare = data->add_subcommand(
      "prepare", "Tokenize text or JSONL files into an indexed dataset PREFIX.bin + PREFIX.idx");
  prepare
      ->add_option("-i,--input", prepare_options->inputs, "Text or JSONL files to read, in order")
      ->required();
  prepare
      ->add_option("-t,--tokenizer", prepare_options->tokenizer,
                   "Tokenizer: byte, a directory with vocab.json + merges.txt or tokenizer.json, "
                   "or a tokenizer.json")
      ->required();
  prepare
      ->add_option("-o,--output", prepare_options->output,
                   "Output prefix (writes PREFIX.bin and PREFIX.idx)")
      ->required();
  prepare->add_flag("--append-eod", prepare_options->append_eod,
                    "End every document with the tokenizer's end-of-document token");
  prepare
      ->add_option("--document-boundary", prepare_options->document_boundary,
                   "Plain text: what makes a document: file (one per input) or blank-line (blocks "
                   "between blank lines)")
      ->capture_default_str();
  prepare->add_option("--json-key", prepare_options->json_key,
                      "Read the inputs as JSONL, one document per line, the text under this key");
  prepare
      ->add_option("-w,--workers", prepare_options->workers,
                   "Threads encoding documents (the output is the same for any number)")
      ->capture_default_str();
  prepare->callback([prepare_options] { data_prepare(*prepare_options); });

  auto inspect_prefix = std::make_shared<std::string>();
  auto inspect_options = std::make_shared<DataInspectOptions>();
  CLI::App* inspect = data->add_subcommand(
      "inspect", "Print the counts, dtype, length histogram and first documents of a dataset");
  inspect->add_option("prefix", *inspect_prefix, "Dataset prefix (PREFIX.bin + PREFIX.idx)")
      ->required();
  inspect->add_option("-t,--tokenizer", inspect_options->tokenizer,
                      "Decode the documents shown with this tokenizer");
  inspect->add_option("--docs", inspect_options->docs, "How many documents to show")
      ->capture_default_str();
  inspect->callback(
      [inspect_prefix, inspect_options] { data_inspect(*inspect_prefix, *inspect_options); });
}

}  // namespace kiln
