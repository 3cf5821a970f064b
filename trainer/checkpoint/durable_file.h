// Files that are either whole or absent after a crash: written, checksummed as they are
// written, fsynced, and only then given their final name by rename(2), whose effect is
// atomic on POSIX file systems. The folder is fsynced too, so the rename itself survives a
// power cut.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace kiln {

// Streams bytes into a new file and its SHA-256. close() flushes and fsyncs; a writer
// destroyed unclosed (an exception on the way) removes its file.
class DurableWriter {
 public:
  explicit DurableWriter(std::string path);
  ~DurableWriter();
  DurableWriter(const DurableWriter&) = delete;
  DurableWriter& operator=(const DurableWriter&) = delete;

  void write(const void* data, size_t bytes);
  void close();

  size_t bytes() const { return bytes_; }
  const std::string& sha256() const { return sha256_; }  // hex; after close()

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  void* digest_ = nullptr;  // EVP_MD_CTX
  size_t bytes_ = 0;
  std::string sha256_;
};

// The SHA-256 of a file's bytes, hex.
std::string sha256_of_file(const std::string& path);

// fsyncs a folder, so the names created or renamed in it are on disk.
void sync_directory(const std::string& path);

// Writes text to path.tmp, fsyncs, and renames it over path.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace kiln
