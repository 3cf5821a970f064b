#include "cli/data_command.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <filesystem>
#include <limits>
#include <memory>
#include <span>
#include <string_view>
#include <thread>

#include <fmt/core.h>

#include "base/check.h"
#include "base/human_format.h"
#include "base/utf8.h"
#include "trainer/data/byte_tokenizer.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/data/loss_mask.h"
#include "trainer/data/tokenizer.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

// The progress line on stderr: redrawn in place on a terminal, a new line every few
// seconds in a log; nothing for a run that ends before the first.
class ProgressLine {
 public:
  explicit ProgressLine(std::FILE* err)
      : err_(err), tty_(err != nullptr && ::isatty(::fileno(err)) == 1) {}

  void show(const DataPrepareProgress& p) {
    if (err_ == nullptr) return;
    if (p.finished) {
      if (drawn_ && tty_) fmt::print(err_, "\n");
      return;
    }
    if (p.seconds - last_ < (tty_ ? 0.5 : 5.0)) return;
    last_ = p.seconds;
    const double s = std::max(p.seconds, 1e-9);
    fmt::print(
        err_,
        "{}data prepare: {} of {} ({:.0f}%), {}/s, {:.0f} documents/s, {:.0f} tokens/s; "
        "{} documents, {} tokens{}",
        tty_ ? "\r" : "", human_bytes(p.bytes), human_bytes(p.total_bytes),
        p.total_bytes > 0 ? 100.0 * static_cast<double>(p.bytes) / static_cast<double>(p.total_bytes)
                          : 100.0,
        human_bytes(static_cast<uint64_t>(static_cast<double>(p.bytes) / s)),
        static_cast<double>(p.documents) / s, static_cast<double>(p.tokens) / s, p.documents,
        p.tokens, tty_ ? "\x1b[K" : "\n");
    std::fflush(err_);
    drawn_ = true;
  }

 private:
  std::FILE* err_;
  bool tty_;
  double last_ = 0.0;  // seconds into the reading at the last line
  bool drawn_ = false;
};

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
  ProgressLine progress(err);
  const DataPrepareSummary summary =
      prepare_dataset(options, err, [&](const DataPrepareProgress& p) { progress.show(p); });
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
               options.workers, options.workers == 1 ? "" : "s", summary.tokenizer,
               summary.bin_path, summary.idx_path);
    if (!summary.mask_idx_path.empty())
      fmt::print(out, "data prepare: {} of the {} tokens trained ({:.1f}%: assistant replies and their turns' ends; "
                 "chat template from {}) -> loss mask {}\n",
                 summary.trained_tokens, summary.tokens,
                 100.0 * static_cast<double>(summary.trained_tokens) / static_cast<double>(std::max<int64_t>(summary.tokens, 1)),
                 summary.chat_template, summary.mask_idx_path);
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
  if (fs::exists(loss_mask_prefix(prefix) + ".idx", ec)) {
    const IndexedDataset mask(loss_mask_prefix(prefix));
    constexpr int64_t kChunk = int64_t{1} << 20;
    std::vector<int32_t> flags(static_cast<size_t>(kChunk));
    int64_t trained = 0;
    for (int64_t at = 0; at < mask.num_tokens(); at += kChunk) {
      const int64_t n = std::min(kChunk, mask.num_tokens() - at);
      mask.read(at, n, flags.data());
      trained += std::count(flags.begin(), flags.begin() + n, 1);
    }
    fmt::print(out, "loss mask: {} of {} tokens trained ({}.idx)\n", trained, mask.num_tokens(),
               loss_mask_prefix(prefix));
  }

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
  ChatDataOptions& chat = prepare_options->chat;
  prepare
      ->add_option("--format", chat.format,
                   "text (documents), chat (JSONL {\"messages\": [{\"role\", \"content\"}, ...]}) or instruct (JSONL "
                   "prompt/response): chat and instruct apply the chat template and write a loss mask")
      ->capture_default_str();
  prepare->add_option("--chat-template", chat.chat_template_file,
                      "A Jinja chat template file to use instead of the tokenizer's (tokenizer_config.json)");
  prepare->add_option("--messages-key", chat.messages_key, "--format chat: the key of the messages")
      ->capture_default_str();
  prepare->add_option("--prompt-key", chat.prompt_key, "--format instruct: the key of the prompt")
      ->capture_default_str();
  prepare->add_option("--response-key", chat.response_key, "--format instruct: the key of the response")
      ->capture_default_str();
  prepare->add_option("--system-key", chat.system_key, "--format instruct: the key of an optional system text")
      ->capture_default_str();
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
