#include "trainer/data/document_segments.h"

#include <span>

#include <fmt/core.h>

#include "base/check.h"
#include "base/utf8.h"
#include "trainer/data/jsonl.h"

namespace kiln {
namespace {

// Text from `path` starting at byte `offset` of it was not UTF-8.
[[noreturn]] void not_utf8(const std::string& path, uint64_t offset, const InvalidUtf8& e,
                           const Tokenizer& tokenizer) {
  fail(fmt::format("data prepare: {}: not valid UTF-8 at byte {} (0x{:02x}); tokenizer {} reads "
                   "UTF-8 text only",
                   path, offset + e.offset, e.byte, tokenizer.name()));
}

}  // namespace

EncodedBatch encode_batch(const std::vector<Segment>& batch, const Tokenizer& tokenizer,
                          const std::vector<std::string>& inputs, const std::string& json_key,
                          const ChatEncoder* chat) {
  EncodedBatch out;
  out.segments.reserve(batch.size());
  for (const Segment& s : batch) {
    const size_t before = out.ids.size();
    const std::string& path = inputs[s.file];
    if (chat) {
      chat->encode(s.text, fmt::format("data prepare: {}:{}", path, s.line), s.offset, out.ids, out.trained);
    } else if (json_key.empty()) {
      try {
        tokenizer.encode(s.text, out.ids);
      } catch (const InvalidUtf8& e) {
        not_utf8(path, s.offset, e, tokenizer);
      }
    } else {
      const std::string where = fmt::format("data prepare: {}:{}", path, s.line);
      tokenizer.encode(jsonl_text(s.text, json_key, where, s.offset), out.ids);
    }
    out.segments.push_back({out.ids.size() - before, s.ends_document});
  }
  return out;
}

void DocumentWriter::write(const EncodedBatch& batch) {
  size_t at = 0;
  for (const EncodedSegment& s : batch.segments) {
    if (s.ids > 0) {
      if (!has_tokens_ && bos_ >= 0) writer_.add_tokens(std::span<const int32_t>(&bos_, 1));
      writer_.add_tokens(std::span<const int32_t>(batch.ids.data() + at, s.ids));
      if (mask_) {
        const std::vector<int32_t> flags(batch.trained.begin() + static_cast<ptrdiff_t>(at),
                                         batch.trained.begin() + static_cast<ptrdiff_t>(at + s.ids));
        mask_->add_tokens(flags);
        for (int32_t f : flags) trained_ += f;
      }
      has_tokens_ = true;
    }
    at += s.ids;
    if (!s.ends_document) continue;
    if (!has_tokens_) {
      ++empty_;
      continue;
    }
    if (append_eod_) {
      writer_.add_tokens(std::span<const int32_t>(&eod_, 1));
      if (mask_) mask_->add_tokens(std::vector<int32_t>{0});
    }
    writer_.end_document();
    if (mask_) mask_->end_document();
    has_tokens_ = false;
  }
}

void SegmentBuilder::text(std::string_view piece, uint64_t offset) {
  if (held_.empty()) held_offset_ = offset;
  held_.append(piece);
  if (held_.size() >= cut_at_) cut();
}

void SegmentBuilder::end_document() {
  emit_({std::move(held_), file_, held_offset_, 0, true});
  held_.clear();
  cut_at_ = kSegmentBytes;
}

void SegmentBuilder::cut() {
  size_t n = 0;
  try {
    n = tokenizer_.stable_prefix(held_);
  } catch (const InvalidUtf8& e) {
    not_utf8(inputs_[file_], held_offset_, e, tokenizer_);
  }
  if (n == 0 && held_.size() >= kMaxHeldBytes) n = utf8_complete_prefix(held_);
  if (n > 0) {
    emit_({held_.substr(0, n), file_, held_offset_, 0, false});
    held_.erase(0, n);
    held_offset_ += n;
  }
  // Not before another segment's worth arrives, so a long stretch with no place to cut
  // is scanned once per segment, not once per byte.
  cut_at_ = held_.size() + kSegmentBytes;
}

}  // namespace kiln
