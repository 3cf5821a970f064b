// The pieces `kiln data prepare` (trainer/data/data_prepare.h) hands between its reader, its
// encoding workers and its writer: a document's text cut into segments where the tokenizer
// says the ids before the cut are final (so a long document is encoded in bounded memory and
// by several workers at once), each batch of segments' ids, and the writer that joins the ids
// back into documents in input order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/data/chat_encoder.h"
#include "trainer/data/document_splitter.h"
#include "trainer/data/indexed_dataset.h"
#include "trainer/data/tokenizer.h"

namespace kiln {

inline constexpr size_t kSegmentBytes = size_t{1} << 20;  // a long document is encoded in pieces of about this
inline constexpr size_t kMaxHeldBytes = size_t{64} << 20;  // ... and cut here even with no safe place to cut

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
  std::vector<uint8_t> trained = {};  // conversations: per id, 1 where it is trained
};

// A worker's job: the ids of each segment of a batch, in order. With json_key, each segment
// is a JSONL line and its text is the one under that key; with chat, each is a conversation. Text that is not UTF-8 is a
// kiln::Error naming the input file and the byte.
EncodedBatch encode_batch(const std::vector<Segment>& batch, const Tokenizer& tokenizer,
                          const std::vector<std::string>& inputs, const std::string& json_key,
                          const ChatEncoder* chat = nullptr);

// Writes encoded batches as they come back in order: a document's ids, then its EOD (with
// append_eod). A document with no ids is skipped and counted. With a mask writer, each id's
// trained flag goes to it, document for document (the EOD is not trained).
class DocumentWriter {
 public:
  // bos >= 0: every document starts with it (a tokenizer's add_bos_token).
  DocumentWriter(IndexedDatasetWriter& writer, int32_t eod, bool append_eod, IndexedDatasetWriter* mask = nullptr,
                 int32_t bos = -1)
      : writer_(writer), mask_(mask), eod_(eod), bos_(bos), append_eod_(append_eod) {}

  void write(const EncodedBatch& batch);
  int64_t empty_documents() const { return empty_; }
  int64_t trained_tokens() const { return trained_; }

 private:
  IndexedDatasetWriter& writer_;
  IndexedDatasetWriter* mask_;
  int32_t eod_;
  int32_t bos_;
  bool append_eod_;
  bool has_tokens_ = false;
  int64_t empty_ = 0;
  int64_t trained_ = 0;
};

// Turns the documents of plain-text files into segments: a document is held until it
// ends, or, when long, cut where the tokenizer says the ids before the cut are final.
class SegmentBuilder : public DocumentSink {
 public:
  SegmentBuilder(const Tokenizer& tokenizer, const std::vector<std::string>& inputs,
                 std::function<void(Segment&&)> emit)
      : tokenizer_(tokenizer), inputs_(inputs), emit_(std::move(emit)) {}

  void start_file(size_t file) { file_ = file; }
  void text(std::string_view piece, uint64_t offset) override;
  void end_document() override;

 private:
  void cut();

  const Tokenizer& tokenizer_;
  const std::vector<std::string>& inputs_;
  std::function<void(Segment&&)> emit_;
  size_t file_ = 0;
  std::string held_;
  uint64_t held_offset_ = 0;
  size_t cut_at_ = kSegmentBytes;
};

}  // namespace kiln
