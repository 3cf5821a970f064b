// Files that are either whole or absent after a crash: written, checksummed as they are
// written, fsynced, and only then given their final name by rename(2), whose effect is
// atomic on POSIX file systems. The folder is fsynced too, so the rename itself survives a
// power cut.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace kiln {

// Who a written file is for.
enum class FileAccess {
  // Checkpoints and the configs kiln runs from (docs/security.md#files-and-relaunches): a new
  // file, 0600 whatever the umask, created without following a link at its name (an existing
  // name is refused).
  OwnerOnly,
  // Files made for other tools and people (a Hugging Face export): created or truncated, with
  // the mode the umask gives, as any program writes a file.
  Shared,
};

// Streams bytes into a file and its SHA-256. close() flushes and fsyncs; a writer destroyed
// unclosed (an exception on the way) removes its file.
class DurableWriter {
 public:
  explicit DurableWriter(std::string path, FileAccess access = FileAccess::Shared);
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

// Writes text to path.tmp (a stale one removed first), fsyncs, and renames it over path: a
// link at path is replaced, never written through.
void write_file_atomically(const std::string& path, const std::string& text,
                           FileAccess access = FileAccess::Shared);

}  // namespace kiln
