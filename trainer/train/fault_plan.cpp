#include "trainer/train/fault_plan.h"

#include <charconv>
#include <cstdlib>
#include <limits>

#include <fmt/core.h>

#include "base/check.h"
#include "base/trim.h"

namespace kiln {
namespace {

template <class T>
bool read_number(std::string_view text, T& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

// "A:B" as two numbers, each at least its least.
template <class A, class B>
bool read_pair(std::string_view text, A& a, B& b, A least_a, B least_b) {
  const size_t colon = text.find(':');
  return colon != text.npos && read_number(text.substr(0, colon), a) && read_number(text.substr(colon + 1), b) &&
         a >= least_a && b >= least_b;
}

Fault read_item(std::string_view item) {
  const size_t at = item.find('@');
  const std::string_view kind = item.substr(0, at), args = at == item.npos ? std::string_view() : item.substr(at + 1);
  Fault f;
  bool ok = at != item.npos;
  if (kind == "nan") {
    f.kind = Fault::Kind::Nan;
    ok = ok && read_number(args, f.step) && f.step >= 1;
  } else if (kind == "spike") {
    f.kind = Fault::Kind::Spike;
    const size_t x = args.find('x');
    f.amount = 10;
    ok = ok && read_number(args.substr(0, x), f.step) && f.step >= 1 &&
         (x == args.npos || (read_number(args.substr(x + 1), f.amount) && f.amount > 0));
  } else if (kind == "slow") {
    f.kind = Fault::Kind::Slow;
    ok = ok && read_pair(args, f.rank, f.amount, 0, 0.0);
  } else if (kind == "stall") {
    f.kind = Fault::Kind::Stall;
    ok = ok && read_pair(args, f.step, f.amount, int64_t{1}, 0.0);
  } else if (kind == "throughput") {
    f.kind = Fault::Kind::Throughput;
    ok = ok && read_pair(args, f.step, f.amount, int64_t{1}, 0.0);
  } else if (kind == "checkpoint") {
    f.kind = Fault::Kind::Checkpoint;
    ok = ok && read_pair(args, f.step, f.amount, int64_t{1}, 0.0);
  } else if (kind == "checkpoint-error") {
    f.kind = Fault::Kind::CheckpointError;
    ok = ok && read_pair(args, f.step, f.rank, int64_t{1}, 0);
  } else {
    fail(fmt::format("KILN_FAULTS: unknown fault \"{}\" (nan@STEP, spike@STEP[xFACTOR], slow@RANK:MS, "
                     "stall@STEP:SECONDS, throughput@STEP:MS, checkpoint@STEP:SECONDS, "
                     "checkpoint-error@STEP:RANK)",
                     item));
  }
  // An hour of delay is a typo, not a rehearsal.
  const double most = f.kind == Fault::Kind::Stall || f.kind == Fault::Kind::Checkpoint ? 3600 : 3.6e6;
  if (!ok || !(f.amount <= most))
    fail(fmt::format("KILN_FAULTS: cannot read \"{}\"; write {}", item,
                     f.kind == Fault::Kind::Nan     ? "nan@STEP, e.g. nan@5"
                     : f.kind == Fault::Kind::Spike ? "spike@STEP[xFACTOR], e.g. spike@8x20"
                     : f.kind == Fault::Kind::Slow  ? "slow@RANK:MS, e.g. slow@1:40"
                     : f.kind == Fault::Kind::Stall ? "stall@STEP:SECONDS, e.g. stall@6:3"
                     : f.kind == Fault::Kind::Checkpoint ? "checkpoint@STEP:SECONDS, e.g. checkpoint@4:30"
                     : f.kind == Fault::Kind::CheckpointError ? "checkpoint-error@STEP:RANK, e.g. checkpoint-error@4:1"
                                                    : "throughput@STEP:MS, e.g. throughput@10:50"));
  return f;
}

}  // namespace

FaultPlan FaultPlan::parse(std::string_view text) {
  FaultPlan plan;
  while (!trim_blanks(text).empty()) {
    const size_t comma = text.find(',');
    plan.faults_.push_back(read_item(trim_blanks(text.substr(0, comma))));
    if (comma == text.npos) break;
    text.remove_prefix(comma + 1);
  }
  return plan;
}

FaultPlan FaultPlan::from_environment() {
  const char* text = std::getenv("KILN_FAULTS");
  return text ? parse(text) : FaultPlan();
}

std::string FaultPlan::describe() const {
  std::string out;
  for (const Fault& f : faults_) {
    if (!out.empty()) out += ", ";
    switch (f.kind) {
      case Fault::Kind::Nan: out += fmt::format("a NaN loss at step {}", f.step); break;
      case Fault::Kind::Spike: out += fmt::format("the loss {:g} times over at step {}", f.amount, f.step); break;
      case Fault::Kind::Slow: out += fmt::format("rank {} working {:g} ms longer every step", f.rank, f.amount); break;
      case Fault::Kind::Stall: out += fmt::format("a stop of {:g} s in step {}", f.amount, f.step); break;
      case Fault::Kind::Throughput:
        out += fmt::format("every rank {:g} ms slower a step from step {}", f.amount, f.step);
        break;
      case Fault::Kind::Checkpoint:
        out += fmt::format("a stop of {:g} s in writing the checkpoint of step {}", f.amount, f.step);
        break;
      case Fault::Kind::CheckpointError:
        out += fmt::format("rank {} failing with an error in the checkpoint of step {}", f.rank, f.step);
        break;
    }
  }
  return out;
}

double FaultPlan::loss_at(int64_t step, double loss) {
  for (Fault& f : faults_) {
    if (f.step != step) continue;
    if (f.kind == Fault::Kind::Nan) loss = std::numeric_limits<double>::quiet_NaN();
    if (f.kind == Fault::Kind::Spike && !f.planted) {
      loss *= f.amount;
      f.planted = true;
    }
  }
  return loss;
}

double FaultPlan::delay_ms(int64_t step, int rank) const {
  double ms = 0;
  for (const Fault& f : faults_) {
    if (f.kind == Fault::Kind::Slow && f.rank == rank) ms += f.amount;
    if (f.kind == Fault::Kind::Stall && f.step == step) ms += f.amount * 1e3;
    if (f.kind == Fault::Kind::Throughput && step >= f.step) ms += f.amount;
  }
  return ms;
}

double FaultPlan::checkpoint_pause_s(int64_t step) const {
  double seconds = 0;
  for (const Fault& f : faults_)
    if (f.kind == Fault::Kind::Checkpoint && f.step == step) seconds += f.amount;
  return seconds;
}

bool FaultPlan::fails_in_checkpoint(int64_t step, int rank) const {
  for (const Fault& f : faults_)
    if (f.kind == Fault::Kind::CheckpointError && f.step == step && f.rank == rank) return true;
  return false;
}

}  // namespace kiln
