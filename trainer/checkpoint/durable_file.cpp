#include "trainer/checkpoint/durable_file.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "base/check.h"
#include "base/private_files.h"
#include "trainer/util/sha256.h"

namespace kiln {
namespace {

std::string system_error(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

std::string finish_digest(EVP_MD_CTX* ctx) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx, digest, &n);
  return hex_of(digest, n);
}

EVP_MD_CTX* new_digest() {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  KILN_CHECK(ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1,
             "checkpoint: cannot start a SHA-256 digest (OpenSSL)");
  return ctx;
}

std::FILE* open_for_writing(const std::string& path, FileAccess access) {
  if (access == FileAccess::Shared) {
    std::FILE* file = std::fopen(path.c_str(), "wbe");
    if (!file) fail(system_error("cannot create", path));
    return file;
  }
  const int fd = create_private_file(path);
  std::FILE* file = ::fdopen(fd, "wb");
  if (!file) {
    const std::string error = system_error("cannot create", path);
    ::close(fd);
    std::remove(path.c_str());
    fail(error);
  }
  return file;
}

}  // namespace

DurableWriter::DurableWriter(std::string path, FileAccess access)
    : path_(std::move(path)), file_(open_for_writing(path_, access)) {
  digest_ = new_digest();
}

DurableWriter::~DurableWriter() {
  if (digest_) EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(digest_));
  if (file_) {
    std::fclose(file_);
    std::remove(path_.c_str());
  }
}

void DurableWriter::write(const void* data, size_t bytes) {
  if (bytes == 0) return;
  if (std::fwrite(data, 1, bytes, file_) != bytes) fail(system_error("cannot write", path_));
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(digest_), data, bytes);
  bytes_ += bytes;
}

void DurableWriter::close() {
  if (std::fflush(file_) != 0 || fsync(fileno(file_)) != 0)
    fail(system_error("cannot write", path_));
  std::FILE* file = file_;
  file_ = nullptr;
  if (std::fclose(file) != 0) fail(system_error("cannot write", path_));
  sha256_ = finish_digest(static_cast<EVP_MD_CTX*>(digest_));
}

std::string sha256_of_file(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rbe");
  if (!file) fail(system_error("cannot open", path));
  EVP_MD_CTX* ctx = new_digest();
  std::vector<unsigned char> buffer(1 << 20);
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), file)) > 0)
    EVP_DigestUpdate(ctx, buffer.data(), n);
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  const std::string digest = finish_digest(ctx);
  EVP_MD_CTX_free(ctx);
  if (failed) fail(system_error("cannot read", path));
  return digest;
}

void sync_directory(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(system_error("cannot open folder", path));
  const int rc = fsync(fd);
  ::close(fd);
  if (rc != 0) fail(system_error("cannot sync folder", path));
}

void write_file_atomically(const std::string& path, const std::string& text, FileAccess access) {
  const std::string tmp = path + ".tmp";
  // Left by a write that crashed (or planted): removing a link removes the link alone.
  std::error_code ignored;
  std::filesystem::remove(tmp, ignored);
  DurableWriter out(tmp, access);
  out.write(text.data(), text.size());
  out.close();
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail("cannot rename " + tmp + " to " + path + ": " + ec.message());
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  sync_directory(folder.empty() ? "." : folder.string());
}

}  // namespace kiln
