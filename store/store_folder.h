// A folder of run stores (`kiln serve --stores DIR`): one store per host or per user, copied
// or mounted side by side.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kiln::store {

// The paths of the `*.db` files directly in `dir` (regular files, links to them too; names
// starting with '.' left out, as a shell's `DIR/*.db` leaves them), sorted by name. A
// folder that is not there, cannot be listed, holds none or more than `most` is a kiln::Error
// in one line, before any store is opened. Whether each is a kiln store is open_store's to say.
std::vector<std::string> stores_in_folder(const std::string& dir, size_t most);

}  // namespace kiln::store
