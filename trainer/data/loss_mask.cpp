#include "trainer/data/loss_mask.h"

#include <filesystem>

#include "base/check.h"

namespace kiln {

std::optional<IndexedDataset> open_loss_mask(const IndexedDataset& data) {
  const std::string prefix = loss_mask_prefix(data.prefix());
  std::error_code ec;
  if (!std::filesystem::exists(prefix + ".idx", ec)) return std::nullopt;
  IndexedDataset mask(prefix);
  const std::string mismatch = "data: the loss mask " + prefix + " does not match " + data.prefix() + " ";
  if (mask.num_documents() != data.num_documents() || mask.num_tokens() != data.num_tokens())
    fail(mismatch + "(" + std::to_string(mask.num_documents()) + " documents and " +
         std::to_string(mask.num_tokens()) + " tokens against " + std::to_string(data.num_documents()) + " and " +
         std::to_string(data.num_tokens()) + "); prepare the data again");
  for (int64_t d = 0; d < data.num_documents(); ++d)
    if (mask.document_tokens(d) != data.document_tokens(d))
      fail(mismatch + "(document " + std::to_string(d) + " differs in length); prepare the data again");
  if (mask.num_tokens() > 0 && mask.max_token(0, mask.num_tokens(), "the loss mask " + prefix) > 1)
    fail(mismatch + "(it holds values other than 0 and 1)");
  return mask;
}

}  // namespace kiln
