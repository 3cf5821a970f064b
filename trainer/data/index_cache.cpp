#include "trainer/data/index_cache.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <system_error>

#include "base/check.h"
#include "trainer/util/sha256.h"

namespace kiln {

namespace fs = std::filesystem;

IndexCache::IndexCache(const std::string& dir, const std::string& name, const std::string& split,
                       nlohmann::json description)
    : description_(std::move(description)) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error || !fs::is_directory(dir))
    fail("data: cannot create the index cache folder " + dir + ": " + error.message() +
         " (set data.cache_dir to a writable folder)");
  const std::string hash = sha256_hex(description_.dump()).substr(0, 16);
  stem_ = (fs::path(dir) / (name + "-" + hash + "-" + split + "-")).string();

  std::ifstream in(stem_ + "description.json");
  if (!in) return;
  // A description that does not parse, or that describes something else (a hash
  // collision, or a file edited by hand), is as good as none: the cache is built again.
  stored_ = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  complete_ = stored_.is_object() && stored_.contains("description") &&
              stored_["description"] == description_;
  if (!complete_)
    damage_ = stem_ + "description.json " +
              (stored_.is_object() ? "describes other data" : "is not a JSON description");
}

std::string IndexCache::array_path(const std::string& array) const {
  return stem_ + array + ".npy";
}

void IndexCache::write_description(const nlohmann::json& facts) {
  stored_ = {{"description", description_}, {"facts", facts}};
  const std::string path = stem_ + "description.json",
                    tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out << stored_.dump(1) << "\n";
    if (!out.flush()) fail("data: cannot write " + tmp);
  }
  fs::rename(tmp, path);
  complete_ = true;
}

std::string cache_dir_for(const std::string& prefix, const std::string& cache_dir) {
  if (!cache_dir.empty()) return cache_dir;
  const fs::path parent = fs::path(prefix).parent_path();
  return (parent.empty() ? fs::path("cache") : parent / "cache").string();
}

}  // namespace kiln
