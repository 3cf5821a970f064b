#include "trainer/data/bpe_tokenizer.h"

#include <algorithm>
#include <cstdlib>
#include <queue>

#include <utf8proc.h>

#include <fmt/core.h>

#include "base/check.h"
#include "base/utf8.h"
#include "trainer/data/bpe_byte_map.h"

namespace kiln {

BpeTokenizer::BpeTokenizer(const BpeModel& model, std::string name)
    : name_(std::move(name)),
      eod_(model.eod),
      bos_(model.bos),
      pad_(model.pad),
      add_bos_(model.add_bos),
      ignore_merges_(model.ignore_merges),
      nfc_(model.nfc),
      specials_(model.specials),
      pretokenizer_(model.pattern) {
  const auto bad = [&](const std::string& what) { fail("tokenizer " + name_ + ": " + what); };

  int32_t max_id = -1;
  for (const BpeToken& t : model.tokens) max_id = std::max(max_id, t.id);
  for (const SpecialToken& s : model.specials) max_id = std::max(max_id, s.id);
  id_bytes_.resize(static_cast<size_t>(max_id + 1));
  special_id_.resize(id_bytes_.size());
  std::vector<bool> used(id_bytes_.size());
  std::unordered_map<std::string, int32_t> by_bytes;
  const auto claim = [&](int32_t id, const std::string& shown) {
    if (used[static_cast<size_t>(id)])
      bad(fmt::format("id {} is given to two tokens (one is \"{}\")", id, shown));
    used[static_cast<size_t>(id)] = true;
  };
  for (const BpeToken& t : model.tokens) {
    claim(t.id, bytes_to_unicode(t.bytes));
    id_bytes_[static_cast<size_t>(t.id)] = t.bytes;
    by_bytes.emplace(t.bytes, t.id);
  }
  for (const SpecialToken& s : model.specials) {
    if (s.text.empty()) bad(fmt::format("special token {} is empty", s.id));
    claim(s.id, s.text);
    id_bytes_[static_cast<size_t>(s.id)] = s.text;
    special_id_[static_cast<size_t>(s.id)] = s.special;
    plain_added_ = plain_added_ || !s.special;
    special_starts_[static_cast<unsigned char>(s.text[0])] = true;
  }
  if (eod_ < 0 || eod_ > max_id) bad("no end-of-document token");
  std::stable_sort(
      specials_.begin(), specials_.end(),
      [](const SpecialToken& a, const SpecialToken& b) { return a.text.size() > b.text.size(); });

  for (int b = 0; b < 256; ++b) {
    const auto it = by_bytes.find(std::string(1, static_cast<char>(b)));
    if (it == by_bytes.end())
      bad(fmt::format("no token for the byte 0x{:02x} (\"{}\"), so some text could not be encoded",
                      b, bytes_to_unicode(std::string(1, static_cast<char>(b)))));
    byte_id_[static_cast<size_t>(b)] = it->second;
  }

  merges_.reserve(model.merges.size() * 2);
  for (size_t rank = 0; rank < model.merges.size(); ++rank) {
    const auto& [left, right] = model.merges[rank];
    const auto l = by_bytes.find(left), r = by_bytes.find(right),
               joined = by_bytes.find(left + right);
    const auto shown = [&] { return bytes_to_unicode(left) + " " + bytes_to_unicode(right); };
    if (l == by_bytes.end() || r == by_bytes.end())
      bad(fmt::format("merge {} (\"{}\") joins a token that is not in the vocabulary", rank,
                      shown()));
    if (joined == by_bytes.end())
      bad(fmt::format("merge {} (\"{}\") makes \"{}\", which is not in the vocabulary", rank,
                      shown(), bytes_to_unicode(left + right)));
    // A pair listed twice keeps its first (lowest) rank.
    merges_.try_emplace(pair_key(l->second, r->second),
                        Merge{static_cast<int32_t>(rank), joined->second});
  }
  if (ignore_merges_) token_id_ = std::move(by_bytes);
}

void BpeTokenizer::encode_into(std::string_view text, std::vector<int32_t>& ids,
                               bool allow_special) const {
  check_utf8(text);
  if (!allow_special && !plain_added_) {
    encode_ordinary(text, ids);
    return;
  }
  size_t start = 0;  // of the ordinary text not yet encoded
  for (size_t i = 0; i < text.size();) {
    const SpecialToken* found = added_at(text, i, allow_special);
    if (found == nullptr) {
      ++i;
      continue;
    }
    encode_ordinary(text.substr(start, i - start), ids);
    ids.push_back(found->id);
    i += found->text.size();
    start = i;
  }
  encode_ordinary(text.substr(start), ids);
}

const SpecialToken* BpeTokenizer::added_at(std::string_view text, size_t i, bool allow_special) const {
  if (!special_starts_[static_cast<unsigned char>(text[i])]) return nullptr;
  for (const SpecialToken& s : specials_)
    if ((allow_special || !s.special) && text.compare(i, s.text.size(), s.text) == 0) return &s;
  return nullptr;
}

size_t BpeTokenizer::stable_prefix(std::string_view text) const {
  // The text is cut at the added tokens matched in any text before it is pre-tokenised: the
  // cut lies in the text after the last of them, or, where that has none yet, just before it.
  size_t after = 0, last = 0;
  if (plain_added_) {
    for (size_t i = 0; i < text.size();) {
      const SpecialToken* found = added_at(text, i, false);
      if (found == nullptr) {
        ++i;
        continue;
      }
      last = i;
      i += found->text.size();
      after = i;
    }
  }
  const std::string_view rest = text.substr(after);
  size_t cut = pretokenizer_.stable_prefix(rest);
  while (nfc_ && cut > 0 && static_cast<unsigned char>(rest[cut]) >= 0x80) --cut;
  return cut > 0 ? after + cut : last;
}

std::string_view BpeTokenizer::normalized(std::string_view text, std::string& storage) const {
  if (!nfc_) return text;
  // Composition is the identity on ASCII, the most of most text.
  if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) return text;
  utf8proc_uint8_t* composed = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &composed, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  KILN_CHECK(n >= 0, std::string("tokenizer: NFC failed: ") + utf8proc_errmsg(n));
  storage.assign(reinterpret_cast<const char*>(composed), static_cast<size_t>(n));
  std::free(composed);
  return storage;
}

void BpeTokenizer::encode_ordinary(std::string_view raw, std::vector<int32_t>& ids) const {
  std::string storage;
  const std::string_view text = normalized(raw, storage);
  std::vector<size_t> ends;
  pretokenizer_.split(text, ends);
  size_t begin = 0;
  for (const size_t end : ends) {
    encode_piece(text.substr(begin, end - begin), ids);
    begin = end;
  }
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& ids) const {
  if (piece.size() == 1) {
    ids.push_back(byte_id_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (ignore_merges_) {
    const auto it = token_id_.find(std::string(piece));
    if (it != token_id_.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  const bool cacheable = piece.size() <= BpePieceCache::kMaxPieceBytes;
  if (cacheable && cache_.find(piece, ids)) return;
  const size_t first = ids.size();
  merge(piece, ids);
  if (cacheable)
    cache_.insert(piece, std::span<const int32_t>(ids.data() + first, ids.size() - first));
}

void BpeTokenizer::merge(std::string_view piece, std::vector<int32_t>& ids) const {
  // The piece as a linked list of tokens, and a heap of candidate merges between
  // neighbours ordered by (rank, position): the lowest rank first and, among equal
  // ranks, the leftmost, which is the order GPT-2's loop merges in. A candidate made
  // stale by an earlier merge is recognised when popped and dropped; O(n log n), so a
  // long piece (a run of a million spaces) stays fast.
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // -1 at the ends
  };
  struct Candidate {
    int32_t rank, left;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  const auto n = static_cast<int32_t>(piece.size());
  std::vector<Symbol> symbols(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i)
    symbols[static_cast<size_t>(i)] = {
        byte_id_[static_cast<unsigned char>(piece[static_cast<size_t>(i)])], i - 1,
        i + 1 < n ? i + 1 : -1};
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto lookup = [&](int32_t left) -> const Merge* {
    const Symbol& l = symbols[static_cast<size_t>(left)];
    if (l.next < 0) return nullptr;
    const auto it = merges_.find(pair_key(l.id, symbols[static_cast<size_t>(l.next)].id));
    return it == merges_.end() ? nullptr : &it->second;
  };
  const auto offer = [&](int32_t left) {
    if (const Merge* m = lookup(left)) heap.push({m->rank, left});
  };
  for (int32_t i = 0; i + 1 < n; ++i) offer(i);

  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& left = symbols[static_cast<size_t>(c.left)];
    if (left.id < 0) continue;  // merged into its left neighbour since
    const Merge* m = lookup(c.left);
    if (m == nullptr || m->rank != c.rank) continue;  // its right neighbour changed since
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    left.id = m->id;
    right.id = -1;
    left.next = right.next;
    if (left.next >= 0) symbols[static_cast<size_t>(left.next)].prev = c.left;
    if (left.prev >= 0) offer(left.prev);
    offer(c.left);
  }
  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next)
    ids.push_back(symbols[static_cast<size_t>(i)].id);
}

std::string BpeTokenizer::decode_ids(std::span<const int32_t> ids, bool skip_special) const {
  std::string text;
  for (const int32_t id : ids) {
    if (id >= 0 && static_cast<size_t>(id) < id_bytes_.size() && !(skip_special && special_id_[static_cast<size_t>(id)]))
      text += id_bytes_[static_cast<size_t>(id)];
  }
  return text;
}

}  // namespace kiln
