#include "trainer/data/indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

#include "base/check.h"

// The format is little-endian and we write and read arrays as host memory.
static_assert(std::endian::native == std::endian::little,
              "kiln's data files assume a little-endian host");

namespace kiln {
namespace {

constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr uint64_t kIndexVersion = 1;
constexpr uint64_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;  // magic, version, dtype, two counts

// Megatron's largest sequence: lengths are stored as int32.
constexpr int64_t kMaxSequence = std::numeric_limits<int32_t>::max();

template <typename T>
T load(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

std::string errno_text() { return std::strerror(errno); }

// Converts count elements of type T at src into int32 ids.
template <typename T>
void convert(const uint8_t* src, int64_t count, int32_t* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<int32_t>(load<T>(src + i * sizeof(T)));
}

void write_all(std::FILE* f, const void* data, size_t bytes, const std::string& path) {
  if (bytes > 0 && std::fwrite(data, 1, bytes, f) != bytes) {
    fail(path + ": write failed: " + errno_text());
  }
}

// Flushes and fsyncs before a rename, so a crash after the rename cannot expose a file
// whose blocks never reached the disk.
void close_durably(std::FILE*& f, const std::string& path) {
  bool ok = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  std::string why = ok ? "" : errno_text();
  ok = (std::fclose(f) == 0) && ok;
  f = nullptr;
  if (!ok) fail(path + ": write failed: " + (why.empty() ? errno_text() : why));
}

}  // namespace

// ---- dtype codes ----

int indexed_dtype::size(int code) {
  switch (code) {
    case kUint8:
    case kInt8:
      return 1;
    case kInt16:
    case kUint16:
      return 2;
    case kInt32:
    case kFloat32:
      return 4;
    case kInt64:
    case kFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* indexed_dtype::name(int code) {
  switch (code) {
    case kUint8:
      return "uint8";
    case kInt8:
      return "int8";
    case kInt16:
      return "int16";
    case kInt32:
      return "int32";
    case kInt64:
      return "int64";
    case kFloat64:
      return "float64";
    case kFloat32:
      return "float32";
    case kUint16:
      return "uint16";
    default:
      return "unknown";
  }
}

int indexed_dtype::for_vocab(int64_t vocab_size) { return vocab_size < 65500 ? kUint16 : kInt32; }

// ---- MappedFile ----

MappedFile::MappedFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path + ": cannot open: " + errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    std::string why = errno_text();
    ::close(fd);
    fail(path + ": cannot stat: " + why);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path + ": not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      std::string why = errno_text();
      ::close(fd);
      fail(path + ": cannot map: " + why);
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

// ---- IndexedDataset ----

IndexedDataset::IndexedDataset(const std::string& prefix)
    : prefix_(prefix), idx_path_(prefix + ".idx"), bin_path_(prefix + ".bin") {
  idx_ = MappedFile(idx_path_);
  validate_index();
  bin_ = MappedFile(bin_path_);
  validate_sequences();
  validate_documents();
}

void IndexedDataset::validate_index() {
  const uint64_t size = idx_.size();
  const uint8_t* p = idx_.data();
  if (size < kHeaderBytes) {
    fail(idx_path_ + ": truncated header (" + std::to_string(size) + " bytes, need " +
         std::to_string(kHeaderBytes) + ")");
  }
  if (std::memcmp(p, kIndexMagic, sizeof(kIndexMagic)) != 0) {
    fail(idx_path_ + ": bad magic (not a Megatron MMIDIDX index file)");
  }
  const uint64_t version = load<uint64_t>(p + 9);
  if (version != kIndexVersion) {
    fail(idx_path_ + ": unsupported version " + std::to_string(version) + " (only 1 is defined)");
  }
  dtype_code_ = p[17];
  dtype_size_ = indexed_dtype::size(dtype_code_);
  if (dtype_size_ == 0 || dtype_code_ == indexed_dtype::kFloat32 ||
      dtype_code_ == indexed_dtype::kFloat64) {
    fail(idx_path_ + ": unsupported dtype code " + std::to_string(dtype_code_) + " (" +
         indexed_dtype::name(dtype_code_) +
         "; token files are uint8, int8, int16, uint16, int32 or int64)");
  }
  const uint64_t sequences = load<uint64_t>(p + 18);
  const uint64_t doc_indices = load<uint64_t>(p + 26);

  // Check each count against the bytes left before multiplying, so a corrupt count
  // cannot overflow the arithmetic.
  const uint64_t body = size - kHeaderBytes;
  if (sequences > body / 12) {
    fail(idx_path_ + ": sequence count " + std::to_string(sequences) + " does not fit the file (" +
         std::to_string(size) + " bytes)");
  }
  const uint64_t after_sequences = body - sequences * 12;
  if (doc_indices > after_sequences / 8) {
    fail(idx_path_ + ": document index count " + std::to_string(doc_indices) +
         " does not fit the file (" + std::to_string(size) + " bytes)");
  }
  const uint64_t expected = kHeaderBytes + sequences * 12 + doc_indices * 8;
  // Multimodal Megatron files append one int8 mode per sequence; we ignore the modes.
  if (size != expected && size != expected + sequences) {
    fail(idx_path_ + ": " + std::to_string(size) + " bytes, but its counts (" +
         std::to_string(sequences) + " sequences, " + std::to_string(doc_indices) +
         " document indices) need " + std::to_string(expected));
  }
  if (doc_indices == 0) fail(idx_path_ + ": no document indices (they must start with 0)");

  num_sequences_ = static_cast<int64_t>(sequences);
  num_doc_indices_ = static_cast<int64_t>(doc_indices);
  lengths_at_ = kHeaderBytes;
  pointers_at_ = lengths_at_ + sequences * 4;
  documents_at_ = pointers_at_ + sequences * 8;
}

void IndexedDataset::validate_sequences() {
  const uint64_t bin_size = bin_.size();
  const uint8_t* p = idx_.data();
  // Sequences must sit back to back from byte 0: that is how every Megatron writer lays
  // them out, and it lets a document range be read as one contiguous run of tokens.
  uint64_t expected = 0;
  for (int64_t i = 0; i < num_sequences_; ++i) {
    const int32_t length = load<int32_t>(p + lengths_at_ + static_cast<uint64_t>(i) * 4);
    const int64_t pointer = load<int64_t>(p + pointers_at_ + static_cast<uint64_t>(i) * 8);
    const std::string which = "sequence " + std::to_string(i);
    if (length < 0)
      fail(idx_path_ + ": " + which + " has negative length " + std::to_string(length));
    if (pointer < 0 || static_cast<uint64_t>(pointer) != expected) {
      fail(idx_path_ + ": " + which + " starts at byte " + std::to_string(pointer) + ", expected " +
           std::to_string(expected) + " (sequences must be stored back to back)");
    }
    const uint64_t end =
        expected + static_cast<uint64_t>(length) * static_cast<uint64_t>(dtype_size_);
    if (end > bin_size) {
      fail(idx_path_ + ": " + which + " (" + std::to_string(length) + " tokens at byte " +
           std::to_string(pointer) + ") runs past the end of " + bin_path_ + " (" +
           std::to_string(bin_size) + " bytes; truncated?)");
    }
    expected = end;
  }
  if (expected != bin_size) {
    fail(bin_path_ + ": " + std::to_string(bin_size) + " bytes, but " + idx_path_ + " describes " +
         std::to_string(expected) + " (files from different runs?)");
  }
  num_tokens_ = static_cast<int64_t>(expected / static_cast<uint64_t>(dtype_size_));
}

int64_t IndexedDataset::document_index(int64_t j) const {
  return load<int64_t>(idx_.data() + documents_at_ + static_cast<uint64_t>(j) * 8);
}

void IndexedDataset::validate_documents() {
  if (document_index(0) != 0) {
    fail(idx_path_ + ": document indices start at " + std::to_string(document_index(0)) +
         ", not 0");
  }
  for (int64_t j = 1; j < num_doc_indices_; ++j) {
    const int64_t prev = document_index(j - 1), cur = document_index(j);
    // Equal neighbours are allowed: Megatron records an empty document that way.
    if (cur < prev) {
      fail(idx_path_ + ": document index " + std::to_string(j) + " is " + std::to_string(cur) +
           ", below the previous " + std::to_string(prev) + " (they must not decrease)");
    }
  }
  const int64_t last = document_index(num_doc_indices_ - 1);
  if (last != num_sequences_) {
    fail(idx_path_ + ": document indices end at " + std::to_string(last) +
         ", not at the sequence count " + std::to_string(num_sequences_));
  }
}

int32_t IndexedDataset::sequence_length(int64_t i) const {
  KILN_CHECK(i >= 0 && i < num_sequences_,
             prefix_ + ": sequence " + std::to_string(i) + " out of range");
  return load<int32_t>(idx_.data() + lengths_at_ + static_cast<uint64_t>(i) * 4);
}

int64_t IndexedDataset::sequence_offset(int64_t i) const {
  KILN_CHECK(i >= 0 && i < num_sequences_,
             prefix_ + ": sequence " + std::to_string(i) + " out of range");
  return load<int64_t>(idx_.data() + pointers_at_ + static_cast<uint64_t>(i) * 8) / dtype_size_;
}

std::pair<int64_t, int64_t> IndexedDataset::document_sequences(int64_t d) const {
  KILN_CHECK(d >= 0 && d < num_documents(),
             prefix_ + ": document " + std::to_string(d) + " out of range");
  return {document_index(d), document_index(d + 1)};
}

std::pair<int64_t, int64_t> IndexedDataset::document_tokens(int64_t d) const {
  const auto [first, last] = document_sequences(d);
  // A document with no sequences (or only trailing ones) starts where the next would.
  const int64_t begin = first < num_sequences_ ? sequence_offset(first) : num_tokens_;
  const int64_t end = last < num_sequences_ ? sequence_offset(last) : num_tokens_;
  return {begin, end};
}

int32_t IndexedDataset::max_token(int64_t begin, int64_t count, const std::string& what) const {
  constexpr int64_t kPiece = 1 << 20;
  std::vector<int32_t> buffer(static_cast<size_t>(std::min(kPiece, count)));
  int32_t max_id = 0;
  for (int64_t at = 0; at < count; at += kPiece) {
    const int64_t n = std::min(kPiece, count - at);
    read(begin + at, n, buffer.data());
    const auto [lo, hi] = std::minmax_element(buffer.begin(), buffer.begin() + n);
    if (*lo < 0) fail("data: " + what + " holds a negative token id " + std::to_string(*lo) + " (corrupt data?)");
    max_id = std::max(max_id, *hi);
  }
  return max_id;
}

void IndexedDataset::read(int64_t token_offset, int64_t count, int32_t* out) const {
  KILN_CHECK(token_offset >= 0 && count >= 0 && token_offset <= num_tokens_ - count,
             bin_path_ + ": read of " + std::to_string(count) + " tokens at " +
                 std::to_string(token_offset) + " runs outside its " + std::to_string(num_tokens_) +
                 " tokens");
  const uint8_t* src =
      bin_.data() + static_cast<uint64_t>(token_offset) * static_cast<uint64_t>(dtype_size_);
  switch (dtype_code_) {
    case indexed_dtype::kUint16:
      convert<uint16_t>(src, count, out);
      break;
    case indexed_dtype::kInt32:
      convert<int32_t>(src, count, out);
      break;
    case indexed_dtype::kUint8:
      convert<uint8_t>(src, count, out);
      break;
    case indexed_dtype::kInt8:
      convert<int8_t>(src, count, out);
      break;
    case indexed_dtype::kInt16:
      convert<int16_t>(src, count, out);
      break;
    case indexed_dtype::kInt64:
      for (int64_t i = 0; i < count; ++i) {
        const int64_t v = load<int64_t>(src + i * 8);
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
          fail(bin_path_ + ": token " + std::to_string(token_offset + i) + " is " +
               std::to_string(v) + ", which does not fit an int32 id");
        }
        out[i] = static_cast<int32_t>(v);
      }
      break;
    default:
      fail(bin_path_ + ": unsupported dtype code " + std::to_string(dtype_code_));
  }
}

// ---- IndexedDatasetWriter ----

IndexedDatasetWriter::IndexedDatasetWriter(const std::string& prefix, int64_t vocab_size)
    : prefix_(prefix), vocab_size_(vocab_size), dtype_code_(indexed_dtype::for_vocab(vocab_size)) {
  KILN_CHECK(vocab_size > 0,
             prefix + ": vocabulary size must be positive, got " + std::to_string(vocab_size));
  const std::string tmp = bin_path() + ".tmp";
  bin_ = std::fopen(tmp.c_str(), "wbe");
  if (bin_ == nullptr) fail(tmp + ": cannot create: " + errno_text());
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (bin_ != nullptr) std::fclose(bin_);
  if (!finished_) {
    std::remove((bin_path() + ".tmp").c_str());
    std::remove((idx_path() + ".tmp").c_str());
  }
}

void IndexedDatasetWriter::add_document(std::span<const int32_t> tokens) {
  add_tokens(tokens);
  end_document();
}

void IndexedDatasetWriter::add_tokens(std::span<const int32_t> tokens) {
  KILN_CHECK(!finished_ && bin_ != nullptr, prefix_ + ": add_tokens after finish()");
  document_open_ = true;
  const size_t width = static_cast<size_t>(indexed_dtype::size(dtype_code_));
  size_t i = 0;
  while (i < tokens.size()) {
    // Fill the open sequence up to Megatron's int32 length limit, then start another.
    if (open_sequence_length_ == kMaxSequence) close_sequence();
    const size_t room = static_cast<size_t>(kMaxSequence - open_sequence_length_);
    const size_t n = std::min(tokens.size() - i, room);
    buffer_.resize(n * width);
    for (size_t k = 0; k < n; ++k) {
      const int32_t t = tokens[i + k];
      if (t < 0 || t >= vocab_size_) {
        fail(prefix_ + ": token id " + std::to_string(t) + " in document " +
             std::to_string(num_documents()) + " is outside the vocabulary of " +
             std::to_string(vocab_size_));
      }
      if (dtype_code_ == indexed_dtype::kUint16) {
        const auto v = static_cast<uint16_t>(t);
        std::memcpy(&buffer_[k * 2], &v, 2);
      } else {
        std::memcpy(&buffer_[k * 4], &t, 4);
      }
    }
    write_all(bin_, buffer_.data(), buffer_.size(), bin_path() + ".tmp");
    open_sequence_length_ += static_cast<int64_t>(n);
    tokens_written_ += static_cast<int64_t>(n);
    i += n;
  }
}

void IndexedDatasetWriter::close_sequence() {
  if (open_sequence_length_ > 0)
    sequence_lengths_.push_back(static_cast<int32_t>(open_sequence_length_));
  open_sequence_length_ = 0;
}

void IndexedDatasetWriter::end_document() {
  KILN_CHECK(!finished_, prefix_ + ": end_document after finish()");
  close_sequence();
  document_indices_.push_back(static_cast<int64_t>(sequence_lengths_.size()));
  document_open_ = false;
}

void IndexedDatasetWriter::finish() {
  KILN_CHECK(!finished_, prefix_ + ": finish() called twice");
  KILN_CHECK(!document_open_,
             prefix_ + ": finish() with a document still open (call end_document())");
  close_durably(bin_, bin_path() + ".tmp");
  write_index();
  // .bin first and .idx last: a reader opens the pair only once the .idx is in place.
  for (const std::string& path : {bin_path(), idx_path()}) {
    if (std::rename((path + ".tmp").c_str(), path.c_str()) != 0) {
      fail(path + ": cannot rename " + path + ".tmp onto it: " + errno_text());
    }
  }
  finished_ = true;
}

void IndexedDatasetWriter::write_index() {
  const std::string tmp = idx_path() + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wbe");
  if (f == nullptr) fail(tmp + ": cannot create: " + errno_text());
  try {
    const uint64_t sequences = sequence_lengths_.size();
    const uint64_t doc_indices = document_indices_.size();
    const auto code = static_cast<uint8_t>(dtype_code_);
    write_all(f, kIndexMagic, sizeof(kIndexMagic), tmp);
    write_all(f, &kIndexVersion, 8, tmp);
    write_all(f, &code, 1, tmp);
    write_all(f, &sequences, 8, tmp);
    write_all(f, &doc_indices, 8, tmp);
    write_all(f, sequence_lengths_.data(), sequences * 4, tmp);
    // Pointers are byte offsets of each sequence, computed in pieces to bound memory.
    const int64_t width = indexed_dtype::size(dtype_code_);
    std::vector<int64_t> pointers;
    pointers.reserve(std::min<uint64_t>(sequences, 1 << 16));
    int64_t at = 0;
    for (int32_t length : sequence_lengths_) {
      pointers.push_back(at);
      at += static_cast<int64_t>(length) * width;
      if (pointers.size() == pointers.capacity()) {
        write_all(f, pointers.data(), pointers.size() * 8, tmp);
        pointers.clear();
      }
    }
    write_all(f, pointers.data(), pointers.size() * 8, tmp);
    write_all(f, document_indices_.data(), doc_indices * 8, tmp);
    close_durably(f, tmp);
  } catch (...) {
    if (f != nullptr) std::fclose(f);
    throw;
  }
}

}  // namespace kiln
