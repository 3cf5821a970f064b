// A small corpus for end-to-end training tests, and the small run that trains on it.
#pragma once

#include <string>
#include <vector>

namespace kiln::test {

// Writes 200 short documents under dir and prepares them with kiln data prepare; returns
// the dataset prefix.
std::string prepare_corpus(const std::string& dir);

// 3000 longer documents ("Verse N: and the earth brought forth grass, ...") under dir, prepared
// as prepare_corpus does: enough for the GPU tests' curves of hundreds of steps. The prefix.
std::string prepare_verses(const std::string& dir);

// --set overrides for a 1-layer byte-level model that trains 6 steps on the corpus in well
// under a second: logs every 2 steps, validates at steps 3 and 6, samples 20 tokens at the end,
// keeps no periodic checkpoint (a test that wants them sets train.checkpoint_interval after this)
// and its final one in a `checkpoints` folder beside the prefix, on one thread: a fixed count, so a run repeats bit for bit whatever the tests beside it run
// (a shared count changes with them, and sums with the team size).
std::string small_run(const std::string& prefix);

// The loss of every progress line ("step N/M | loss X ...") a training run printed, in order.
std::vector<double> step_losses(const std::string& output);

// Every "loss X" a training run printed (training and validation), in order.
std::vector<double> printed_losses(const std::string& output);

// Every "grad norm X" a training run printed (one a logged step), in order.
std::vector<double> printed_grad_norms(const std::string& output);

}  // namespace kiln::test
