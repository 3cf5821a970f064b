// Files kiln writes for one user and reads back later, on a machine other users share
// (docs/security.md#files-and-relaunches). What kiln creates is this user's alone (folders
// 0700, files 0600), made without following a link planted at its name; what it reads back
// must be a real folder or regular file of this user, not a link, that no one else may
// write; small files (a `latest` pointer, a token) are read to a bound, regular files only,
// so a link to /dev/zero cannot exhaust memory nor a FIFO hang the reader.
//
// Every descriptor these return is close-on-exec: a child kiln starts inherits none of them.
#pragma once

#include <cstddef>
#include <string>

namespace kiln {

// Opens a log to append to, creating it 0600: a symlink at the path, something that is not
// a regular file, or a file of another user is refused (kiln::Error naming the path).
// Returns the descriptor, close-on-exec.
int open_private_log(const std::string& path);

// Creates a new file 0600 (O_EXCL: an existing name, link or not, is refused) and returns
// its descriptor, close-on-exec.
int create_private_file(const std::string& path);

// Makes a folder 0700 and the missing folders above it (those with the same mode). An
// existing folder at the path itself must pass require_private: kiln is about to write into it.
void make_private_folder(const std::string& path);

// Refuses (kiln::Error, "WHAT PATH ...") a path kiln is about to trust: it must exist, not be
// a symbolic link, be a folder or a regular file, be owned by this user, and not be writable
// by the group or others. `what` names it in the message ("checkpoint", "the run folder").
void require_private(const std::string& path, const std::string& what);

// The same checks as a question: "" when the path passes, else the reason.
std::string why_not_private(const std::string& path);

// Reads a small file whole: a regular file (a link is followed only when follow_links),
// at most max_bytes, else a kiln::Error naming `what`. Never blocks on a FIFO.
std::string read_small_file(const std::string& path, size_t max_bytes, bool follow_links, const std::string& what);

}  // namespace kiln
