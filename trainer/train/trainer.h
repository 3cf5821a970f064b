// The training loop on one process: for each step, gradient accumulation over the
// micro-batches of one global batch, clipping, AdamW at the scheduled learning rate;
// a progress line every log interval, validation every eval interval, a clean stop
// on Ctrl-C, and a generated sample at the end when asked.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>

#include "trainer/config/config.h"
#include "trainer/data/gpt_dataset.h"
#include "trainer/model/gpt_model.h"
#include "trainer/optim/adamw.h"
#include "trainer/optim/loss_scaler.h"

namespace kiln {

struct TrainSummary {
  int64_t steps = 0;
  double train_loss = 0;                // mean over the last log interval
  std::optional<double> valid_loss;     // the last validation, when there is a valid split
  bool interrupted = false;
};

class Trainer {
 public:
  // Checks what the config asks of this process, opens the data, lays out the model and
  // optimizer; prints the run header and memory. Throws kiln::Error on bad input.
  explicit Trainer(const Config& config, std::FILE* out = stdout);
  ~Trainer();

  TrainSummary run();
  GptModel& model() { return *model_; }

 private:
  double train_step(int64_t step);
  double evaluate();
  void fill_batch(const GptDataset& data, int64_t first_sample);

  Config config_;
  std::FILE* out_;
  std::unique_ptr<Ops> ops_;
  std::unique_ptr<GptDataset> train_data_;
  std::unique_ptr<GptDataset> valid_data_;
  std::unique_ptr<GptModel> model_;
  std::unique_ptr<AdamW> optimizer_;
  LossScaler loss_scaler_;
  std::vector<int32_t> window_, tokens_, targets_;
};

}  // namespace kiln
