#include "trainer/data/sample_source.h"

namespace kiln {

const char* split_name(Split split) {
  switch (split) {
    case Split::Train:
      return "train";
    case Split::Valid:
      return "valid";
    case Split::Test:
      return "test";
  }
  return "?";
}

}  // namespace kiln
