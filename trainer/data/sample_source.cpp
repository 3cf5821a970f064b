#include "trainer/data/sample_source.h"

#include "base/check.h"

namespace kiln {

void SampleSource::loss_mask(int64_t, int32_t*) const { fail("data: " + describe() + " has no loss mask"); }

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
