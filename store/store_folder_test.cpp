// `kiln serve --stores DIR`'s folder: its *.db files by name, bounded, refused in one line
// when it holds none or too many.
#include "store/store_folder.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "store/test_util.h"

namespace kiln::store {
namespace {

using testing_util::error_of;

class StoreFolderTest : public testing_util::StoreTest {
 protected:
  void touch(const std::string& name) { std::ofstream(path(name)) << "x"; }
};

TEST_F(StoreFolderTest, ListsTheDbFilesDirectlyInItByName) {
  for (const char* name : {"host-b.db", "host-a.db", ".hidden.db", "notes.txt", "host-a.db-wal", "host-c.db.recover"})
    touch(name);
  std::filesystem::create_directories(path("nested.db"));
  std::filesystem::create_directories(path("sub"));
  touch("sub/deeper.db");
  EXPECT_EQ(stores_in_folder(dir_.string(), 64), (std::vector<std::string>{path("host-a.db"), path("host-b.db")}));
}

TEST_F(StoreFolderTest, RefusesAFolderWithNoneOrTooMany) {
  EXPECT_EQ(error_of([&] { stores_in_folder(path("none"), 64); }),
            "store: no folder at " + path("none") + " (--stores takes a folder of *.db run stores)");
  touch("one.txt");
  EXPECT_EQ(error_of([&] { stores_in_folder(path("one.txt"), 64); }),
            "store: " + path("one.txt") +
                " is not a folder (--stores takes a folder of *.db run stores; --store takes one store file)");
  EXPECT_EQ(error_of([&] { stores_in_folder(dir_.string(), 64); }),
            "store: " + dir_.string() + " holds no run stores (no *.db files)");
  for (const char* name : {"a.db", "b.db", "c.db"}) touch(name);
  EXPECT_EQ(error_of([&] { stores_in_folder(dir_.string(), 2); }),
            "store: " + dir_.string() + " holds 3 run stores (*.db files); a dashboard shows at most 2 at once");
}

}  // namespace
}  // namespace kiln::store
