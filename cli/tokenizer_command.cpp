#include "cli/tokenizer_command.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/human_format.h"
#include "trainer/data/bpe_byte_map.h"
#include "trainer/data/bpe_gpt2_files.h"
#include "trainer/data/bpe_trainer.h"
#include "trainer/data/jsonl.h"
#include "trainer/data/tokenizer.h"
#include "trainer/util/step_clock.h"

namespace kiln {
namespace {

std::string read_input(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("tokenize: cannot open " + path + ": " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<int32_t> parse_ids(const std::string& text, int32_t vocab_size) {
  nlohmann::json ids;
  try {
    ids = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    fail(std::string("tokenize --decode: the input is not JSON: ") + e.what());
  }
  if (!ids.is_array())
    fail("tokenize --decode: the input must be a JSON array of ids, like [464, 3290]");
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!ids[i].is_number_integer() || ids[i].get<int64_t>() < 0 ||
        ids[i].get<int64_t>() >= vocab_size)
      fail(fmt::format("tokenize --decode: element {} is {}, not an id in [0, {})", i,
                       ids[i].dump(), vocab_size));
    out.push_back(ids[i].get<int32_t>());
  }
  return out;
}

}  // namespace

void tokenizer_train(const TokenizerTrainOptions& options, std::FILE* out) {
  const auto start = Clock::now();
  if (options.inputs.empty()) fail("tokenizer train: no --input files given");
  if (options.output.empty()) fail("tokenizer train: --output is empty; give a directory");
  if (options.vocab_size < 257)
    fail(fmt::format("tokenizer train: --vocab-size {} is below 257 (256 bytes and <|endoftext|>)",
                     options.vocab_size));
  if (options.min_frequency < 1)
    fail(fmt::format("tokenizer train: --min-frequency {} must be at least 1",
                     options.min_frequency));

  BpeTrainer trainer;
  if (options.json_key.empty()) warn_of_jsonl(options.inputs, "tokenizer train", "learned", out);
  for (const std::string& path : options.inputs) {
    if (options.json_key.empty()) trainer.add_file(path);
    else trainer.add_jsonl_file(path, options.json_key);
  }
  fmt::print(out, "tokenizer train: {} pieces ({} distinct) in {} of text, counted in {:.2f} s\n",
             trainer.pieces(), trainer.distinct_pieces(),
             human_bytes(static_cast<uint64_t>(trainer.bytes())), seconds_since(start));
  std::fflush(out);

  const auto merging = Clock::now();
  int64_t next_report = 0;
  const BpeModel model =
      trainer.train({options.vocab_size, options.min_frequency}, [&](const BpeTrainProgress& p) {
        // A line at every tenth of the way: few enough for a log, enough to watch.
        if (p.merges_done < next_report && p.merges_done != p.merges_wanted) return;
        next_report = p.merges_done + std::max<int64_t>(1, p.merges_wanted / 10);
        fmt::print(out, "tokenizer train: merge {}/{}: \"{}\" seen {} times ({:.2f} s)\n",
                   p.merges_done, p.merges_wanted, bytes_to_unicode(p.token), p.count,
                   seconds_since(merging));
        std::fflush(out);
      });
  write_gpt2_files(model, options.output);

  const auto vocab = static_cast<int32_t>(model.tokens.size() + model.specials.size());
  if (vocab < options.vocab_size)
    fmt::print(out,
               "tokenizer train: stopped at {} ids: no pair is left that is seen at least "
               "--min-frequency={} times\n",
               vocab, options.min_frequency);
  fmt::print(out,
             "tokenizer train: {} ids (256 bytes, {} merges, <|endoftext|> = {}) in {:.2f} s "
             "-> {}/vocab.json, {}/merges.txt\n",
             vocab, model.merges.size(), model.eod, seconds_since(start), options.output,
             options.output);
  std::fflush(out);
}

void tokenize(const TokenizeOptions& options, std::FILE* out) {
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(options.tokenizer);
  const std::string text = options.input.empty() ? options.text : read_input(options.input);
  if (options.decode) {
    const std::vector<int32_t> ids = parse_ids(text, tokenizer->vocab_size());
    const std::string decoded = options.skip_special ? tokenizer->decode_skipping_special(ids) : tokenizer->decode(ids);
    std::fwrite(decoded.data(), 1, decoded.size(), out);
  } else {
    std::vector<int32_t> ids;
    tokenizer->encode(text, ids, options.allow_special);
    std::string json = "[";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) json += ", ";
      json += std::to_string(ids[i]);
    }
    fmt::print(out, "{}]\n", json);
  }
  std::fflush(out);
}

void add_tokenizer_commands(CLI::App& app) {
  CLI::App* group = app.add_subcommand("tokenizer", "Train byte-level BPE tokenizers");
  group->require_subcommand(1);
  auto train_options = std::make_shared<TokenizerTrainOptions>();
  CLI::App* train = group->add_subcommand(
      "train", "Learn a byte-level BPE (GPT-2's rules) and write vocab.json + merges.txt");
  train->add_option("-i,--input", train_options->inputs, "UTF-8 text (or, with --json-key, JSONL) files to learn from")
      ->required();
  train->add_option("--json-key", train_options->json_key,
                    "Read the inputs as JSONL, one document per line, the text under this key");
  train
      ->add_option("--vocab-size", train_options->vocab_size,
                   "Ids in all: 256 bytes, the merges and <|endoftext|>")
      ->required();
  train->add_option("-o,--output", train_options->output, "Directory for vocab.json and merges.txt")
      ->required();
  train
      ->add_option("--min-frequency", train_options->min_frequency,
                   "Never merge a pair seen fewer times than this")
      ->capture_default_str();
  train->callback([train_options] { tokenizer_train(*train_options); });

  auto tokenize_options = std::make_shared<TokenizeOptions>();
  CLI::App* cmd =
      app.add_subcommand("tokenize", "Print the ids of a text as a JSON array, or decode ids");
  cmd->add_option(
         "-t,--tokenizer", tokenize_options->tokenizer,
         "byte, a directory with vocab.json + merges.txt or tokenizer.json, or a tokenizer.json")
      ->required();
  CLI::Option* text = cmd->add_option("--text", tokenize_options->text,
                                      "The text (with --decode: a JSON array of ids)");
  CLI::Option* input =
      cmd->add_option("-i,--input", tokenize_options->input, "A file holding it instead");
  text->excludes(input);
  cmd->add_flag("--decode", tokenize_options->decode, "Read ids and print their text");
  cmd->add_flag("--allow-special", tokenize_options->allow_special,
                "Encode special tokens written in the text (<|endoftext|>) as their ids");
  cmd->add_flag("--skip-special-tokens", tokenize_options->skip_special,
                "With --decode: leave out the special tokens (Hugging Face's skip_special_tokens)")
      ->needs(cmd->get_option("--decode"));
  cmd->callback([tokenize_options, text, input] {
    if (text->count() == 0 && input->count() == 0)
      fail("tokenize: give --text STR or --input FILE");
    tokenize(*tokenize_options);
  });
}

}  // namespace kiln
