// Megatron-LM's indexed dataset: token files that Megatron's tools/preprocess_data.py
// writes and megatron/core/datasets/indexed_dataset.py reads, so data prepared by either
// tool trains in the other. A dataset is two files beside each other:
//
//   PREFIX.bin  the tokens of every sequence, back to back, in one integer dtype
//   PREFIX.idx  the index, all little-endian:
//                 magic "MMIDIDX\0\0" (9 bytes), version uint64 = 1, dtype code uint8,
//                 sequence count S uint64, document-index count D uint64,
//                 sequence lengths int32[S] (tokens), sequence pointers int64[S] (bytes
//                 into .bin), document indices int64[D] (0, then the running number of
//                 sequences after each document; so D = documents + 1)
//
// docs/data.md has the byte layout table.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

// Megatron's dtype codes (megatron.core.datasets.indexed_dataset.DType).
namespace indexed_dtype {
constexpr int kUint8 = 1;
constexpr int kInt8 = 2;
constexpr int kInt16 = 3;
constexpr int kInt32 = 4;
constexpr int kInt64 = 5;
constexpr int kFloat64 = 6;
constexpr int kFloat32 = 7;
constexpr int kUint16 = 8;

// Bytes per element of a code, 0 for a code Megatron does not define.
int size(int code);
// "uint16", "int32", ...; "unknown" for a code Megatron does not define.
const char* name(int code);
// Megatron's rule for token files: uint16 when the vocabulary is below 65500, else int32.
int for_vocab(int64_t vocab_size);
}  // namespace indexed_dtype

// A read-only memory map of a whole file; unmapped when destroyed. Move-only.
class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);  // throws kiln::Error naming the path
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;  // null for an empty file: mmap cannot map 0 bytes
  uint64_t size_ = 0;
};

// Reads PREFIX.bin + PREFIX.idx through memory maps; nothing is copied. The constructor
// validates the whole index against both file sizes, so every accessor after it can
// trust the numbers. Move-only.
class IndexedDataset {
 public:
  explicit IndexedDataset(const std::string& prefix);

  const std::string& prefix() const { return prefix_; }
  int64_t num_sequences() const { return num_sequences_; }
  int64_t num_documents() const { return num_doc_indices_ - 1; }
  int64_t num_tokens() const { return num_tokens_; }
  int dtype_code() const { return dtype_code_; }

  int32_t sequence_length(int64_t i) const;
  // Where sequence i starts, in tokens from the start of .bin.
  int64_t sequence_offset(int64_t i) const;
  // The sequences of document d: [first, last).
  std::pair<int64_t, int64_t> document_sequences(int64_t d) const;
  // The tokens of document d: [begin, end) in tokens from the start of .bin (sequences
  // are back to back, so a document is one contiguous range).
  std::pair<int64_t, int64_t> document_tokens(int64_t d) const;

  // Copies tokens [token_offset, token_offset + count) of .bin into out, converted from
  // the stored dtype to int32. Throws when the range leaves the file or when an int64
  // file holds an id that does not fit int32.
  void read(int64_t token_offset, int64_t count, int32_t* out) const;
  // The largest id of tokens [begin, begin + count), read in bounded pieces; a negative id
  // (only a signed-dtype file from elsewhere could hold one) is a kiln::Error naming `what`.
  int32_t max_token(int64_t begin, int64_t count, const std::string& what) const;

 private:
  void validate_index();
  void validate_sequences();
  void validate_documents();
  int64_t document_index(int64_t j) const;

  std::string prefix_, idx_path_, bin_path_;
  MappedFile idx_, bin_;
  int dtype_code_ = 0;
  int dtype_size_ = 0;
  int64_t num_sequences_ = 0;
  int64_t num_doc_indices_ = 0;
  int64_t num_tokens_ = 0;
  // Byte offsets of the three arrays inside .idx (they are not aligned: the header is
  // 34 bytes, so elements are read with memcpy).
  uint64_t lengths_at_ = 0, pointers_at_ = 0, documents_at_ = 0;
};

// Writes PREFIX.bin + PREFIX.idx: one sequence per document, as Megatron writes without
// sentence splitting (a document over 2^31 - 1 tokens becomes several sequences, since a
// sequence length is an int32). Tokens stream to PREFIX.bin.tmp as they come, so memory
// holds only 12 bytes per document; finish() writes PREFIX.idx.tmp and renames both onto
// their final names (.bin first, .idx last), so an interrupted run never leaves a partial
// file under a final name. Destroying a writer before finish() removes its .tmp files.
class IndexedDatasetWriter {
 public:
  IndexedDatasetWriter(const std::string& prefix, int64_t vocab_size);
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  // One whole document: add_tokens(tokens) then end_document().
  void add_document(std::span<const int32_t> tokens);
  // Streams a document in pieces; end_document() closes it. A document with no tokens
  // is recorded as Megatron records it: a document of zero sequences.
  void add_tokens(std::span<const int32_t> tokens);
  void end_document();
  void finish();

  int dtype_code() const { return dtype_code_; }
  int64_t num_documents() const { return static_cast<int64_t>(document_indices_.size()) - 1; }
  int64_t num_tokens() const { return tokens_written_; }
  std::string bin_path() const { return prefix_ + ".bin"; }
  std::string idx_path() const { return prefix_ + ".idx"; }

 private:
  void close_sequence();
  void write_index();

  std::string prefix_;
  int64_t vocab_size_;
  int dtype_code_;
  std::FILE* bin_ = nullptr;
  bool finished_ = false;
  std::vector<uint8_t> buffer_;  // one piece of tokens converted to the file dtype
  int64_t tokens_written_ = 0;
  int64_t open_sequence_length_ = 0;  // tokens of the open sequence so far
  bool document_open_ = false;
  std::vector<int32_t> sequence_lengths_;
  std::vector<int64_t> document_indices_{0};
};

}  // namespace kiln
