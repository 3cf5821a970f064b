#include "trainer/data/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/check.h"
#include "base/utf8.h"
#include "tests/error_of.h"
#include "tests/test_files.h"
#include "trainer/data/bpe_byte_map.h"
#include "trainer/data/bpe_gpt2_files.h"
#include "trainer/data/bpe_hf_json.h"
#include "trainer/data/bpe_trainer.h"

namespace kiln {
namespace {

using Ids = std::vector<int32_t>;

// The 256 bytes as ids 0..255, then the given merges, then <|endoftext|>.
BpeModel model_with(const std::vector<std::pair<std::string, std::string>>& merges) {
  BpeModel m;
  for (int b = 0; b < 256; ++b) m.tokens.push_back({b, std::string(1, static_cast<char>(b))});
  auto next = static_cast<int32_t>(m.tokens.size());
  for (const auto& [left, right] : merges) {
    m.merges.emplace_back(left, right);
    m.tokens.push_back({next++, left + right});
  }
  m.eod = next;
  m.specials.push_back({next, "<|endoftext|>"});
  return m;
}

// A model learned from varied text, so that many merges apply.
const BpeModel& trained_model() {
  static const BpeModel model = [] {
    BpeTrainer trainer;
    std::string text;
    for (int i = 0; i < 20; ++i)
      text +=
          "The quick brown fox can't jump; it's 12:30 and we'll be late. "
          "Caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x8e\x89\n\n\t";
    trainer.add_text(text);
    return trainer.train({600, 2});
  }();
  return model;
}

const BpeTokenizer& trained() {
  static const BpeTokenizer tokenizer(trained_model(), "trained");
  return tokenizer;
}

TEST(BpeTokenizer, MergesByRank) {
  const BpeTokenizer abc(model_with({{"a", "b"}, {"ab", "c"}}), "abc");
  EXPECT_EQ(abc.vocab_size(), 259);
  EXPECT_EQ(abc.eod(), 258);
  EXPECT_EQ(abc.encode("abc"), (Ids{257}));
  EXPECT_EQ(abc.encode(" abc abd"), (Ids{' ', 257, ' ', 256, 'd'}));

  // The lower rank wins wherever it sits in the piece.
  const BpeTokenizer bc_first(model_with({{"b", "c"}, {"a", "b"}}), "bc");
  EXPECT_EQ(bc_first.encode("abc"), (Ids{'a', 256}));
  EXPECT_EQ(bc_first.encode("abd"), (Ids{257, 'd'}));

  // Equal pairs merge from the left, as GPT-2's loop does.
  const BpeTokenizer aa(model_with({{"a", "a"}}), "aa");
  EXPECT_EQ(aa.encode("aaa"), (Ids{256, 'a'}));
  EXPECT_EQ(aa.encode("aaaa"), (Ids{256, 256}));
}

TEST(BpeTokenizer, SpecialTokensOnlyWhenAllowed) {
  const BpeTokenizer t(model_with({}), "plain");
  const std::string text = "a<|endoftext|>b";
  Ids ids;
  t.encode(text, ids, true);
  EXPECT_EQ(ids, (Ids{'a', t.eod(), 'b'}));
  const Ids as_text = t.encode(text);
  EXPECT_EQ(as_text.size(), text.size());
  EXPECT_EQ(std::count(as_text.begin(), as_text.end(), t.eod()), 0);
  EXPECT_EQ(t.decode(ids), text);
  EXPECT_EQ(t.decode(as_text), text);
  // A special token cut short is text.
  ids.clear();
  t.encode("<|endoftext|", ids, true);
  EXPECT_EQ(ids.size(), 12u);
}

TEST(BpeTokenizer, AppendsToTheIdsGiven) {
  const BpeTokenizer& t = trained();
  Ids ids{7};
  t.encode("fox", ids);
  EXPECT_EQ(ids.front(), 7);
  EXPECT_EQ(Ids(ids.begin() + 1, ids.end()), t.encode("fox"));
}

TEST(BpeTokenizer, RefusesTextThatIsNotUtf8) {
  const BpeTokenizer& t = trained();
  try {
    t.encode("fine text \xc3\x28 then more");
    FAIL() << "no throw";
  } catch (const InvalidUtf8& e) {
    EXPECT_EQ(e.offset, 10u);
    EXPECT_NE(std::string(e.what()).find("offset 10"), std::string::npos) << e.what();
  }
}

TEST(BpeTokenizer, RoundTripsVariedText) {
  const BpeTokenizer& t = trained();
  const std::vector<std::string> texts = {
      "",
      "The quick brown fox can't jump; it's 12:30 and we'll be late.",
      "caf\xc3\xa9 cafe\xcc\x81 A\xcc\x8a Z\xcd\x91\xcd\xab",  // combining marks
      "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4",  // CJK, Hangul
      "   leading, trailing   \n\n\n\t\t\ttabs\r\nCRLF  ",  // whitespace runs
      "IT'S WE'LL they're I'd you've I'm 'tis",             // contractions
      "0 12 345 6789 3.14159 1,000,000 -42 0x1F",           // digits
      "\xf0\x9f\x8e\x89 \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd "
      "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9",  // emoji
      "<|endoftext|> between <|endoftext|><|endoftext|>",
      std::string(5000, ' ') + std::string(5000, 'x') + std::string(3000, '!'),
      std::string("nul \0 and \x7f controls", 22),
  };
  for (const std::string& text : texts) {
    EXPECT_EQ(t.decode(t.encode(text)), text) << text;
    Ids ids;
    t.encode(text, ids, true);
    EXPECT_EQ(t.decode(ids), text) << text;
  }
  EXPECT_LT(t.encode(texts[1]).size(), texts[1].size() / 2) << "the merges apply";
}

TEST(BpeTokenizer, RoundTripsRandomUnicode) {
  const BpeTokenizer& t = trained();
  std::mt19937 rng(7);
  // Code points from every UTF-8 length, surrogates skipped.
  const std::vector<std::pair<uint32_t, uint32_t>> ranges = {
      {0x0, 0x7f}, {0x80, 0x7ff}, {0x800, 0xd7ff}, {0xe000, 0xffff}, {0x10000, 0x10ffff}};
  for (int round = 0; round < 200; ++round) {
    std::string text;
    for (int i = 0; i < 40; ++i) {
      const auto& [lo, hi] = ranges[rng() % ranges.size()];
      const uint32_t cp = lo + rng() % (hi - lo + 1);
      if (cp < 0x80) {
        text.push_back(static_cast<char>(cp));
      } else if (cp < 0x800) {
        text += {static_cast<char>(0xc0 | cp >> 6), static_cast<char>(0x80 | (cp & 0x3f))};
      } else if (cp < 0x10000) {
        text += {static_cast<char>(0xe0 | cp >> 12), static_cast<char>(0x80 | (cp >> 6 & 0x3f)),
                 static_cast<char>(0x80 | (cp & 0x3f))};
      } else {
        text += {static_cast<char>(0xf0 | cp >> 18), static_cast<char>(0x80 | (cp >> 12 & 0x3f)),
                 static_cast<char>(0x80 | (cp >> 6 & 0x3f)), static_cast<char>(0x80 | (cp & 0x3f))};
      }
    }
    ASSERT_EQ(invalid_utf8_offset(text), std::string_view::npos);
    ASSERT_EQ(t.decode(t.encode(text)), text);
  }
}

TEST(BpeTokenizer, EncodingInStableChunksEqualsEncodingWhole) {
  const BpeTokenizer& t = trained();
  std::string text;
  for (int i = 0; i < 300; ++i)
    text += "we'll see  it's 12.5%\n\n\xe6\x97\xa5\xe6\x9c\xac caf\xc3\xa9 ";
  const Ids whole = t.encode(text);
  for (const size_t chunk : {100, 1000, 4096}) {
    Ids pieces;
    std::string held;
    for (size_t at = 0; at < text.size(); at += chunk) {
      held += text.substr(at, chunk);
      const size_t cut = t.stable_prefix(held);
      t.encode(std::string_view(held).substr(0, cut), pieces);
      held.erase(0, cut);
    }
    t.encode(held, pieces);
    EXPECT_EQ(pieces, whole) << "chunks of " << chunk;
  }
}

TEST(BpeTokenizer, SameIdsFromManyThreads) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "thread " + std::to_string(i) + " can't race the cache. ";
  // A fresh tokenizer, so the threads fill its cache together.
  const BpeTokenizer shared(trained_model(), "shared");
  std::vector<Ids> got(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i)
    threads.emplace_back([&, i] {
      for (int r = 0; r < 20; ++r) got[i] = shared.encode(text);
    });
  for (std::thread& th : threads) th.join();
  const Ids expected = BpeTokenizer(trained_model(), "alone").encode(text);
  for (const Ids& ids : got) EXPECT_EQ(ids, expected);
}

TEST(BpeTokenizer, LongPiecesStayFast) {
  // One piece of 4 MiB letters: quadratic merging would take minutes.
  const BpeTokenizer aa(model_with({{"a", "a"}, {"aa", "aa"}}), "aa");
  const std::string text(size_t{4} << 20, 'a');
  const Ids ids = aa.encode(text);
  EXPECT_EQ(ids.size(), text.size() / 4);
  EXPECT_EQ(aa.decode(ids), text);
}

TEST(BpeTokenizer, DecodeSkipsIdsWithoutATokenAndShowsSpecials) {
  const BpeTokenizer t(model_with({{"a", "b"}}), "ab");
  EXPECT_EQ(t.decode(Ids{256, -1, 999, t.eod(), 'c'}), "ab<|endoftext|>c");
}

TEST(BpeTokenizer, RefusesABrokenModel) {
  BpeModel no_byte = model_with({});
  no_byte.tokens.erase(no_byte.tokens.begin() + 'q');
  EXPECT_THROW(BpeTokenizer(no_byte, "x"), Error);

  BpeModel bad_merge = model_with({});
  bad_merge.merges.emplace_back("x", "y");  // "xy" is not a token
  try {
    BpeTokenizer t(bad_merge, "bad");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("merge 0 (\"x y\") makes \"xy\""), std::string::npos)
        << e.what();
  }

  BpeModel twice = model_with({});
  twice.tokens.push_back({5, "zz"});
  EXPECT_THROW(BpeTokenizer(twice, "x"), Error);
}

using test::error_of;
using test::fresh_dir;

TEST(BpeFiles, Gpt2FilesRoundTrip) {
  const std::string dir = fresh_dir("gpt2_files");
  const BpeModel model = model_with({{" ", "t"}, {" t", "h"}, {"\n", "\n"}});
  write_gpt2_files(model, dir);
  std::ifstream merges(dir + "/merges.txt");
  std::string line;
  std::getline(merges, line);
  EXPECT_EQ(line, "#version: 0.2");
  std::getline(merges, line);
  EXPECT_EQ(line, "\xc4\xa0 t");  // a space is written as "Ġ"
  const BpeTokenizer written(model, "model");
  const BpeTokenizer read(read_gpt2_files(dir + "/vocab.json", dir + "/merges.txt"), dir);
  const std::string text = " the\n\nthe <|endoftext|>";
  EXPECT_EQ(read.encode(text), written.encode(text));
  EXPECT_EQ(read.eod(), 259);
  EXPECT_EQ(read.vocab_size(), 260);
}

TEST(BpeFiles, Gpt2FilesErrorsNameTheFile) {
  const std::string dir = fresh_dir("gpt2_bad");
  write_gpt2_files(model_with({{"a", "b"}}), dir);
  std::ofstream(dir + "/merges.txt") << "#version: 0.2\na b\nthree parts here\n";
  try {
    read_gpt2_files(dir + "/vocab.json", dir + "/merges.txt");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("merges.txt line 3"), std::string::npos) << e.what();
  }
  std::ofstream(dir + "/vocab.json") << "{\"a\": 0}";
  EXPECT_THROW(read_gpt2_files(dir + "/vocab.json", dir + "/merges.txt"),
               Error);  // no <|endoftext|>
}

// A tokenizer.json for model_with({{"a", "b"}}), laid out as Hugging Face writes it.
nlohmann::json hf_json() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[bytes_to_unicode(std::string(1, static_cast<char>(b)))] = b;
  vocab["ab"] = 256;
  vocab["<|endoftext|>"] = 257;
  return {
      {"version", "1.0"},
      {"added_tokens",
       {{{"id", 257},
         {"content", "<|endoftext|>"},
         {"single_word", false},
         {"lstrip", false},
         {"rstrip", false},
         {"normalized", true},
         {"special", true}}}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"},
        {"add_prefix_space", false},
        {"trim_offsets", true},
        {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"vocab", vocab},
        {"merges", {"a b"}}}},
  };
}

BpeTokenizer from_json(const nlohmann::json& doc, const std::string& name) {
  const std::string path = fresh_dir(name) + "/tokenizer.json";
  std::ofstream(path) << doc.dump();
  return BpeTokenizer(read_hf_tokenizer_json(path), path);
}

TEST(BpeFiles, ReadsHuggingFaceTokenizerJson) {
  const BpeTokenizer expected(model_with({{"a", "b"}}), "model");
  const std::string text = "abc ab <|endoftext|>";
  EXPECT_EQ(from_json(hf_json(), "hf").encode(text), expected.encode(text));
  EXPECT_EQ(from_json(hf_json(), "hf").eod(), 257);

  nlohmann::json pairs = hf_json();  // merges as [left, right], as tokenizers >= 0.20 write
  pairs["model"]["merges"] = nlohmann::json::array({nlohmann::json::array({"a", "b"})});
  EXPECT_EQ(from_json(pairs, "hf_pairs").encode(text), expected.encode(text));

  // Llama 3 style: the regex in a Split, then ByteLevel without its own. This one makes
  // every character a piece, so "a" and "b" never meet.
  nlohmann::json split = hf_json();
  split["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern", {{"Regex", "(?s)."}}},
         {"behavior", "Isolated"},
         {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  const BpeTokenizer llama = from_json(split, "hf_split");
  EXPECT_EQ(llama.encode("ab"), (Ids{'a', 'b'}));
  EXPECT_EQ(expected.encode("ab"), (Ids{256}));
  EXPECT_EQ(llama.decode(llama.encode("12345 ab\n")), "12345 ab\n");
}

// Qwen's normalizer: "e" + U+0301 (combining acute) is encoded as the one character "é" is.
TEST(BpeFiles, TheNfcNormalizerComposesBeforeSplitting) {
  nlohmann::json doc = hf_json();
  const std::string e_acute = "\xc3\xa9", decomposed = "e\xcc\x81";
  doc["model"]["vocab"][bytes_to_unicode(e_acute)] = 258;
  doc["model"]["merges"].push_back(bytes_to_unicode("\xc3") + " " + bytes_to_unicode("\xa9"));
  const BpeTokenizer plain = from_json(doc, "hf_plain");
  doc["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}};
  const BpeTokenizer nfc = from_json(doc, "hf_nfc");
  EXPECT_EQ(nfc.encode("caf" + decomposed), (Ids{'c', 'a', 'f', 258}));
  EXPECT_EQ(nfc.encode("caf" + e_acute), (Ids{'c', 'a', 'f', 258}));
  EXPECT_EQ(plain.encode("caf" + decomposed), (Ids{'c', 'a', 'f', 'e', 0xcc, 0x81}));
  // A long text cut where the tokenizer says is stable encodes as the whole: never between
  // a letter and the mark composed into it.
  std::string text;
  for (int i = 0; i < 400; ++i) text += (i % 3 ? "caf" + decomposed + " " : decomposed + decomposed);
  const size_t cut = nfc.stable_prefix(text);
  ASSERT_GT(cut, 0u);
  Ids parts = nfc.encode(text.substr(0, cut));
  const Ids rest = nfc.encode(text.substr(cut));
  parts.insert(parts.end(), rest.begin(), rest.end());
  EXPECT_EQ(parts, nfc.encode(text));
}

// Hugging Face's added tokens: one that is not special (Qwen3's <think>) is matched in any text,
// a special one only where special tokens are allowed; decoding without the special tokens
// drops those alone.
TEST(BpeFiles, AddedTokensThatAreNotSpecialAreMatchedInAnyText) {
  nlohmann::json doc = hf_json();
  doc["added_tokens"].push_back({{"id", 258}, {"content", "<think>"}, {"single_word", false}, {"lstrip", false},
                                 {"rstrip", false}, {"normalized", false}, {"special", false}});
  doc["added_tokens"].push_back({{"id", 259}, {"content", "<|im_end|>"}, {"single_word", false}, {"lstrip", false},
                                 {"rstrip", false}, {"normalized", false}, {"special", true}});
  const BpeTokenizer t = from_json(doc, "hf_added");
  const std::string text = "a<think>b<|im_end|>";
  Ids ordinary = {'a', 258, 'b'};
  for (const char c : std::string("<|im_end|>")) ordinary.push_back(static_cast<unsigned char>(c));
  EXPECT_EQ(t.encode(text), ordinary);
  std::vector<int32_t> allowed;
  t.encode(text, allowed, true);
  EXPECT_EQ(allowed, (Ids{'a', 258, 'b', 259}));
  allowed.push_back(t.eod());
  EXPECT_EQ(t.decode(allowed), text + "<|endoftext|>");
  EXPECT_EQ(t.decode_skipping_special(allowed), "a<think>b");

  // A long text cut where the tokenizer says is stable encodes as the whole, the non-special
  // tokens in it matched as they are in the whole.
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += i % 7 ? "ab <th" : "a<think>b ";
  long_text += "<think>";
  for (const size_t end : {long_text.size(), long_text.size() - 3}) {
    const std::string_view whole = std::string_view(long_text).substr(0, end);
    const size_t cut = t.stable_prefix(whole);
    ASSERT_GT(cut, 0u);
    Ids parts = t.encode(whole.substr(0, cut));
    const Ids rest = t.encode(whole.substr(cut));
    parts.insert(parts.end(), rest.begin(), rest.end());
    EXPECT_EQ(parts, t.encode(whole)) << end;
  }
  // Only the tokens: the cut falls before the last of them.
  std::string tokens;
  for (int i = 0; i < 30; ++i) tokens += "<think>";
  EXPECT_EQ(t.stable_prefix(tokens), tokens.size() - 7);

  doc["added_tokens"][1]["lstrip"] = true;
  try {
    from_json(doc, "hf_lstrip");
    ADD_FAILURE() << "lstrip was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("added token \"<think>\" has lstrip true, which kiln does not compute"),
              std::string::npos)
        << e.what();
  }
}

// tokenizer_config.json beside a tokenizer.json names its end of document (eos_token), its
// begin (bos_token, added before every text with add_bos_token) and its padding.
TEST(BpeFiles, TokenizerConfigNamesTheSpecialTokens) {
  nlohmann::json doc = hf_json();
  doc["added_tokens"].push_back({{"id", 258}, {"content", "<|begin_of_text|>"}, {"special", true}});
  doc["added_tokens"].push_back({{"id", 259}, {"content", "<|eot_id|>"}, {"special", true}});
  const std::string dir = fresh_dir("hf_token_config");
  std::ofstream(dir + "/tokenizer.json") << doc.dump();
  const auto load_with = [&](const nlohmann::json& config) {
    std::ofstream(dir + "/tokenizer_config.json") << config.dump();
    return load_tokenizer(dir);
  };
  std::unique_ptr<Tokenizer> t =
      load_with({{"bos_token", "<|begin_of_text|>"},
                 {"eos_token", {{"content", "<|eot_id|>"}, {"lstrip", false}, {"special", true}}},
                 {"pad_token", nullptr},
                 {"add_bos_token", true}});
  EXPECT_EQ(t->eod(), 259);
  EXPECT_EQ(t->bos(), 258);
  EXPECT_TRUE(t->adds_bos());
  EXPECT_EQ(t->pad(), 259);  // none named: the end of document
  t = load_with({{"eos_token", "<|endoftext|>"}, {"pad_token", "<|eot_id|>"}});
  EXPECT_EQ(t->eod(), 257);
  EXPECT_EQ(t->pad(), 259);
  EXPECT_EQ(t->bos(), -1);
  EXPECT_FALSE(t->adds_bos());
  const std::string config = dir + "/tokenizer_config.json";
  EXPECT_EQ(error_of([&] { load_with({{"eos_token", "<|nope|>"}}); }),
            "tokenizer: " + config + ": eos_token \"<|nope|>\" is not a token of " + dir);
  EXPECT_EQ(error_of([&] { load_with({{"add_bos_token", true}}); }),
            "tokenizer: " + config + ": add_bos_token is true, and no bos_token names the token to add");
  // Without <|endoftext|> among its tokens, eos_token alone names the end of document.
  doc["added_tokens"].erase(0);
  doc["model"]["vocab"].erase("<|endoftext|>");
  std::ofstream(dir + "/tokenizer.json") << doc.dump();
  EXPECT_EQ(load_with({{"eos_token", "<|eot_id|>"}})->eod(), 259);
  std::filesystem::remove(config);
  EXPECT_EQ(error_of([&] { load_tokenizer(dir); }),
            "tokenizer: " + dir + ": no end-of-document token: no eos_token in a tokenizer_config.json beside it, "
            "and none of <|endoftext|>, <|end_of_text|>, </s> among its added tokens");
}

TEST(BpeFiles, RefusesWhatWouldChangeTheIds) {
  const auto refused = [](const nlohmann::json& doc, const std::string& expected) {
    try {
      from_json(doc, "hf_refused");
      ADD_FAILURE() << "accepted; expected " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  nlohmann::json doc = hf_json();
  doc["normalizer"] = {{"type", "NFKC"}};
  refused(doc, "the normalizer NFKC is not supported: kiln computes NFC (Qwen's) or none");
  doc["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Lowercase"}}}}};
  refused(doc, "the normalizer Lowercase is not supported");
  doc = hf_json();
  doc["pre_tokenizer"]["add_prefix_space"] = true;
  refused(doc, "pre_tokenizer.add_prefix_space = true is not supported");
  doc = hf_json();
  doc["model"]["type"] = "WordPiece";
  refused(doc, "BPE models only");
  doc = hf_json();
  doc["added_tokens"] = nlohmann::json::array();
  refused(doc, "no end-of-document token");
  doc = hf_json();
  doc["model"]["merges"] = {"a b c"};
  refused(doc, "model.merges[0]");
}

}  // namespace
}  // namespace kiln
