// Checkpoints that could not be written, in a row (train.checkpoint_failures).
//
// A checkpoint is insurance, not the training: one that a full disk or a folder the run may
// not write refuses is a warning, and the run trains on and tries again at the next one. A
// run whose checkpoints keep failing would lose everything at its end or its first crash,
// so `limit` failures in a row fail it.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

class CheckpointFailures {
 public:
  // A checkpoint was written: the count starts over.
  void written() { in_a_row_ = 0; }
  // The checkpoint of `step` could not be written, for `why`. Returns the warning to print
  // and record; throws kiln::Error, one line, when it is the `limit`th in a row.
  std::string failed(int64_t step, const std::string& why, int limit);
  // The last checkpoint tried was not written.
  bool last_failed() const { return in_a_row_ > 0; }

 private:
  int in_a_row_ = 0;
};

}  // namespace kiln
