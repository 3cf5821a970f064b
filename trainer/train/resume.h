// What resuming from a checkpoint restores and changes: the model and optimizer of the same
// model, the run's name (a fork's parent), and a warning for the schedule keys it changed.
#pragma once

#include <cstdio>
#include <string>

#include "kernels/ops.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/config.h"
#include "trainer/model/gpt_model.h"
#include "trainer/optim/adamw.h"
#include "trainer/train/run_recorder.h"

namespace kiln {

// Restores the model and optimizer from `checkpoint`, refusing one of another model, with
// LoRA adapters trained under other settings, or holding a selection bias this model has no
// layer for. Returns the checkpoint's training state, which the caller hands to whoever holds
// each part of it (Trainer::restore_training_state). A resume and a rewind past a loss spike
// (run_rewinds.h) both restore through here.
TrainingState restore_checkpoint(const Checkpoint& checkpoint, const Config& config, GptModel& model,
                                 AdamW& optimizer, Ops& ops);

// Restores the model and optimizer from the checkpoint at `resume`, refusing one that leaves
// no step to train or holds a selection bias this model has no layer for; names the run in
// `recording` (the checkpoint's name unless the user gave one) and fills its resume fields.
// Returns the checkpoint's training state, which the caller continues from.
TrainingState resume_training(const std::string& resume, const Config& config, GptModel& model, AdamW& optimizer,
                              Ops& ops, RecordOptions& recording, std::FILE* out);

}  // namespace kiln
