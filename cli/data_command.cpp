#include "cli/data_command.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string_view>

#include <fmt/core.h>

#include "kernels/check.h"
#include "trainer/data/byte_tokenizer.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/util/human_format.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunk = size_t{1} << 20;          // bytes read from an input at a time
constexpr size_t kEncodeChunk = size_t{1} << 20;        // text held before it is encoded
constexpr uint64_t kProgressFrom = uint64_t{64} << 20;  // inputs this large report progress

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}


// Collects a document's text, encodes it in bounded pieces and streams the ids to the
// writer. Encoding in pieces is exact for the byte tokenizer, which has no state across
// bytes. Empty documents are skipped (no document, no EOD).
class DocumentSink {
 public:
  DocumentSink(IndexedDatasetWriter& writer, const ByteTokenizer& tokenizer, bool append_eod)
      : writer_(writer), tokenizer_(tokenizer), append_eod_(append_eod) {}

  void put(char c) {
    text_.push_back(c);
    if (text_.size() >= kEncodeChunk) flush();
  }
  void put(std::string_view s) {
    text_.append(s);
    if (text_.size() >= kEncodeChunk) flush();
  }

  void end_document() {
    flush();
    if (!has_tokens_) return;
    if (append_eod_) {
      const int32_t eod = ByteTokenizer::kEod;
      writer_.add_tokens(std::span<const int32_t>(&eod, 1));
    }
    writer_.end_document();
    has_tokens_ = false;
  }

 private:
  void flush() {
    if (text_.empty()) return;
    writer_.add_tokens(tokenizer_.encode(text_));
    has_tokens_ = true;
    text_.clear();
  }

  IndexedDatasetWriter& writer_;
  const ByteTokenizer& tokenizer_;
  bool append_eod_;
  std::string text_;
  bool has_tokens_ = false;
};

// --document-boundary blank-line: a document is a block of lines; one or more blank
// lines (empty or whitespace only) separate blocks. A document keeps its text exactly,
// except the line ending after its last line, which is dropped. Fed byte by byte across
// read chunks, holding back only what might still turn out to be a boundary: the last
// line ending and the whitespace at the start of the current line.
class BlankLineSplitter {
 public:
  explicit BlankLineSplitter(DocumentSink& sink) : sink_(sink) {}

  void feed(std::string_view chunk) {
    for (char c : chunk) put(c);
  }

  // The end of an input file ends its last document; held line endings are dropped.
  void end_file() {
    sink_.end_document();
    held_.clear();
    line_has_text_ = false;
    held_cr_ = false;
  }

 private:
  static bool is_blank(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
  }

  void put(char c) {
    if (held_cr_) {  // a '\r' after text: part of a "\r\n" line ending, or just a byte
      held_cr_ = false;
      if (c == '\n') {
        held_ = "\r\n";
        line_has_text_ = false;
        return;
      }
      sink_.put('\r');
    }
    if (c == '\n') {
      if (line_has_text_) {
        held_ = "\n";  // ends a line of text; kept only if more text follows
        line_has_text_ = false;
      } else {
        sink_.end_document();  // a blank line: the block is over
        held_.clear();
      }
      return;
    }
    if (!line_has_text_) {
      if (is_blank(c)) {
        held_.push_back(c);
        return;
      }
      sink_.put(held_);  // the line has text after all: its indentation belongs to it
      held_.clear();
      line_has_text_ = true;
    }
    if (c == '\r') {
      held_cr_ = true;
      return;
    }
    sink_.put(c);
  }

  DocumentSink& sink_;
  std::string held_;
  bool line_has_text_ = false;
  bool held_cr_ = false;
};

// A progress line on stderr for large inputs: redrawn in place on a terminal, a new
// line every few seconds in a log.
class Progress {
 public:
  Progress(std::FILE* err, uint64_t total_bytes)
      : err_(err),
        total_(total_bytes),
        enabled_(err != nullptr && total_bytes >= kProgressFrom),
        tty_(enabled_ && ::isatty(::fileno(err)) == 1),
        start_(Clock::now()),
        last_(start_) {}

  void update(uint64_t done, int64_t documents) {
    if (!enabled_) return;
    const auto now = Clock::now();
    if (now - last_ < std::chrono::milliseconds(tty_ ? 500 : 5000)) return;
    last_ = now;
    const double rate = static_cast<double>(done) / std::max(seconds_since(start_), 1e-9);
    fmt::print(err_, "{}data prepare: {} of {} ({:.0f}%), {} documents, {}/s{}", tty_ ? "\r" : "",
               human_bytes(done), human_bytes(total_),
               100.0 * static_cast<double>(done) / static_cast<double>(total_), documents,
               human_bytes(static_cast<uint64_t>(rate)), tty_ ? "\x1b[K" : "\n");
    std::fflush(err_);
    drawn_ = true;
  }

  void done() {
    if (drawn_ && tty_) fmt::print(err_, "\n");
  }

 private:
  std::FILE* err_;
  uint64_t total_;
  bool enabled_, tty_;
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

// Streams one input through the document boundary rule.
uint64_t read_input(const std::string& path, const std::string& boundary, DocumentSink& sink,
                    BlankLineSplitter& splitter, const std::function<void(uint64_t)>& on_chunk) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) fail("data prepare: cannot open input " + path + ": " + std::strerror(errno));
  std::string chunk(kReadChunk, '\0');
  uint64_t bytes = 0;
  while (true) {
    const size_t n = std::fread(chunk.data(), 1, chunk.size(), f.get());
    if (n > 0) {
      const std::string_view piece(chunk.data(), n);
      if (boundary == "file") {
        sink.put(piece);
      } else {
        splitter.feed(piece);
      }
      bytes += n;
      on_chunk(n);
    }
    if (n < chunk.size()) {
      if (std::ferror(f.get()))
        fail("data prepare: cannot read input " + path + ": " + std::strerror(errno));
      break;
    }
  }
  if (boundary == "file") {
    sink.end_document();
  } else {
    splitter.end_file();
  }
  return bytes;
}

// Shows the first `limit` bytes of a byte-tokenized document as a quoted line: control
// bytes escaped, EOD as <eod>, a UTF-8 character cut by the limit left out.
std::string preview(const std::vector<int32_t>& ids, bool truncated) {
  std::string text;
  for (int32_t id : ids) {
    if (id == ByteTokenizer::kEod) {
      text += "<eod>";
      continue;
    }
    const std::string byte = ByteTokenizer().decode(std::span<const int32_t>(&id, 1));
    const auto c = static_cast<unsigned char>(byte[0]);
    if (c == '\n')
      text += "\\n";
    else if (c == '\t')
      text += "\\t";
    else if (c == '\r')
      text += "\\r";
    else if (c == '\\')
      text += "\\\\";
    else if (c == '"')
      text += "\\\"";
    else if (c < 0x20 || c == 0x7f)
      text += fmt::format("\\x{:02x}", c);
    else
      text += byte;
  }
  if (truncated) {
    // Drop a trailing UTF-8 sequence the cut left incomplete.
    size_t lead = text.size();
    while (lead > 0 && (static_cast<unsigned char>(text[lead - 1]) & 0xc0) == 0x80) --lead;
    if (lead > 0 && static_cast<unsigned char>(text[lead - 1]) >= 0xc0) {
      const auto c = static_cast<unsigned char>(text[lead - 1]);
      const size_t need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
      if (text.size() - (lead - 1) < need) text.resize(lead - 1);
    }
  }
  return "\"" + text + "\"" + (truncated ? "..." : "");
}

}  // namespace

DataPrepareSummary data_prepare(const DataPrepareOptions& options, std::FILE* out, std::FILE* err) {
  const auto start = Clock::now();
  if (options.tokenizer != "byte") {
    fail("data prepare: unknown tokenizer \"" + options.tokenizer + "\" (available: byte)");
  }
  if (options.document_boundary != "file" && options.document_boundary != "blank-line") {
    fail("data prepare: unknown --document-boundary \"" + options.document_boundary +
         "\" (file or blank-line)");
  }
  const uint64_t total_bytes = check_inputs(options.inputs);
  check_output(options.output);

  const ByteTokenizer tokenizer;
  IndexedDatasetWriter writer(options.output, ByteTokenizer::kVocabSize);
  DocumentSink sink(writer, tokenizer, options.append_eod);
  BlankLineSplitter splitter(sink);
  Progress progress(err, total_bytes);

  DataPrepareSummary summary;
  for (const auto& path : options.inputs) {
    uint64_t done_before = static_cast<uint64_t>(summary.bytes);
    summary.bytes += static_cast<int64_t>(
        read_input(path, options.document_boundary, sink, splitter, [&](uint64_t n) {
          done_before += n;
          progress.update(done_before, writer.num_documents());
        }));
  }
  progress.done();
  if (writer.num_documents() == 0) {
    fail("data prepare: the inputs hold no text (" + std::to_string(options.inputs.size()) +
         " file(s), all empty or blank), so there is nothing to write");
  }
  writer.finish();

  summary.documents = writer.num_documents();
  summary.tokens = writer.num_tokens();
  summary.seconds = seconds_since(start);
  if (out != nullptr) {
    fmt::print(out, "data prepare: {} documents, {} tokens from {} bytes in {:.2f} s -> {}, {}\n",
               summary.documents, summary.tokens, summary.bytes, summary.seconds, writer.bin_path(),
               writer.idx_path());
    std::fflush(out);
  }
  return summary;
}

void data_inspect(const std::string& prefix, std::FILE* out) {
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

  constexpr int64_t kShown = 200;
  const auto [begin, end] = ds.document_tokens(0);
  const int64_t n = std::min(end - begin, kShown);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  ds.read(begin, n, ids.data());
  const bool bytes_only = std::all_of(
      ids.begin(), ids.end(), [](int32_t id) { return id >= 0 && id <= ByteTokenizer::kEod; });
  if (bytes_only) {
    fmt::print(out, "first document ({} tokens, as bytes): {}\n", end - begin,
               preview(ids, end - begin > n));
  } else {
    // Ids past the byte tokenizer's: another tokenizer wrote it, so show ids, not text.
    std::string shown;
    for (size_t i = 0; i < std::min<size_t>(ids.size(), 20); ++i)
      shown += (i ? ", " : "") + std::to_string(ids[i]);
    fmt::print(out, "first document ({} tokens, ids beyond the byte tokenizer): [{}{}]\n",
               end - begin, shown, end - begin > 20 ? ", ..." : "");
  }
}

void add_data_command(CLI::App& app) {
  CLI::App* data =
      app.add_subcommand("data", "Prepare and inspect token datasets (Megatron .bin + .idx)");
  data->require_subcommand(1);

  auto prepare_options = std::make_shared<DataPrepareOptions>();
  CLI::App* prepare = data->add_subcommand(
      "prepare", "Tokenize text files into an indexed dataset PREFIX.bin + PREFIX.idx");
  prepare->add_option("-i,--input", prepare_options->inputs, "Text files to read, in order")
      ->required();
  prepare->add_option("-t,--tokenizer", prepare_options->tokenizer, "Tokenizer: byte")->required();
  prepare
      ->add_option("-o,--output", prepare_options->output,
                   "Output prefix (writes PREFIX.bin and PREFIX.idx)")
      ->required();
  prepare->add_flag("--append-eod", prepare_options->append_eod,
                    "End every document with the end-of-document token");
  prepare
      ->add_option(
          "--document-boundary", prepare_options->document_boundary,
          "What makes a document: file (one per input) or blank-line (blocks between blank lines)")
      ->capture_default_str();
  prepare->callback([prepare_options] { data_prepare(*prepare_options); });

  auto inspect_prefix = std::make_shared<std::string>();
  CLI::App* inspect =
      data->add_subcommand("inspect", "Print the counts, dtype and first document of a dataset");
  inspect->add_option("prefix", *inspect_prefix, "Dataset prefix (PREFIX.bin + PREFIX.idx)")
      ->required();
  inspect->callback([inspect_prefix] { data_inspect(*inspect_prefix); });
}

}  // namespace kiln
