// The mixture-of-experts branch (docs/moe.md), in place of the MLP of the layers moe.* names:
//   logits = x Wr^T                         router, [N, E]
//   choices, gates = route_tokens(logits)   each token's experts (expert_routing.h's rule)
//   rows = route_rows(choices)              the experts' rows, expert by expert
//   rows_in = gather_rows(x, rows.source)   each token copied to the rows of its experts
//   rows_e = MLP_e(rows_e) for each expert  one grouped product per weight
//   y = combine_rows(rows_out, gates)       each token's experts weighed by their gates
//     (+ the shared experts' MLP of x, which every token takes)
// Backward runs the same steps in reverse: the gates' gradients are the dot products of dy
// with the experts' outputs (row_dots), the router's from route_backward. Routing runs on the
// device; the host reads back only the experts' row offsets, which size the products and the
// exchange (not even those when moe.pad_to_capacity fixes them), and the step's loads.
//
// Experts' weights are stacked: fc [E * fc_width, C] and proj [E * C, F], expert e owning
// rows [e * width, (e + 1) * width), as one parameter each, so an expert-parallel rank holds
// a contiguous slice.
//
// Expert parallelism (parallel.ep): each rank of the expert group holds E / ep experts and
// routes its own tokens over all E. Its rows are expert-major, so the rows for rank q's
// experts are contiguous; the ranks trade their per-expert counts (all-gather), then
//   all_to_all                 rows to their experts' ranks, arriving rank by rank
//   gather_rows                permuted expert by expert
//   rows_e = MLP_e(rows_e)     for this rank's experts
//   gather_rows, all_to_all    back in rank order, then home
// and backward sends the output gradients the same way and the input gradients back.
//
// Tensor parallelism splits every expert's hidden units over the tensor group (parallel.etp
// = tp), each rank routing the whole micro-batch; with parallel.etp=1 the experts stay whole
// and each tensor rank routes its own share of the tokens (sequence parallelism) through an
// expert group folded over the tensor and data-parallel ranks (layout.h), the shared experts
// still split over the tensor group.
//
// The selection bias of aux-loss-free balancing is host state that the trainer moves after
// each step (move_selection_bias) and checkpoints save; the next forward takes it to the device.
#pragma once

#include <string>
#include <vector>

#include "trainer/model/expert_routing.h"
#include "trainer/model/linear.h"
#include "trainer/model/sequence_parallel.h"

namespace kiln {

// What one forward of the branch writes and its backward reads, for up to `tokens` tokens
// of a micro-batch (N of them routed here: all, or with whole experts, etp < tp, this tensor
// rank's share; M rows) and, with expert parallelism over ep ranks, the R rows its experts
// receive (R = M and the expert rows are the local ones when ep is 1).
struct ExpertBuffers {
  Tensor logits;                      // [N, E]
  Tensor choice, choice_row, gate;    // [N, k] the expert, row and gate of each choice
  Tensor stats;                       // [E + 2] route_tokens' statistics
  Tensor counts;                      // [2, E] each expert's choices, then drops
  Tensor shares;                      // [E] the choices the balancing loss weighs (ops.h)
  Tensor offsets;                     // I32 [E + 1] each expert's first row
  Tensor source, row_gate;            // [M] the token and gate of each expert row
  Tensor rows_in, rows_out;           // [M, C] this rank's tokens' rows
  Tensor expert_in, fc_out, hidden;   // [R, C], [R, fc width], [R, F]
  Tensor expert_out;                  // [R, C]
  // ep > 1: where each received row goes, expert by expert (I32 [R]: the row of the
  // rank-by-rank order it is taken from), and back (the inverse).
  Tensor to_expert, to_rank;
  Tensor shared_fc, shared_hidden;    // [N, shared fc width], [N, S] (empty without)

  static ExpertBuffers take(Arena& arena, const ModelConfig& model, int64_t tokens, DType dtype,
                            DType stat_dtype, int ep = 1, int etp = 1, int tp = 1);
};

// The gradients backward passes between its steps; one set serves every layer.
struct ExpertGradients {
  Tensor d_gate;                            // [N, k]
  Tensor d_rows_out, d_rows_in;             // [M, C]
  Tensor d_expert_out, d_hidden, d_fc, d_expert_in;  // [R, ...] as the buffers
  Tensor exchanged;  // ep > 1: [R, C], the rows that travel, in rank order (both passes)
  Tensor d_logits;                          // [N, E]
  Tensor d_shared_hidden, d_shared_fc;
  // tp > 1: [N, C] the whole micro-batch's output (sequence parallel) or input gradient
  // before the group's sum.
  Tensor whole;

  static ExpertGradients take(Arena& arena, const ModelConfig& model, int64_t tokens, DType dtype,
                              DType stat_dtype, int ep = 1, int etp = 1, int tp = 1);
};

// The host's view of one micro-batch's routing: what sizes its products and slices.
struct ExpertRows {
  int64_t tokens = 0;          // N, routed here
  int64_t balance_tokens = 0;  // the tokens the balancing loss covers (ops.h's RouteLoss)
  ExpertRoute rule;            // for those N tokens
  std::vector<int64_t> offsets;  // [E + 1] each expert's first row
  int64_t rows() const { return offsets.back(); }
};

// How one micro-batch's rows travel between the ranks of an expert group.
struct ExpertExchange {
  std::vector<int64_t> send_rows, recv_rows;  // per rank of the group
  std::vector<int64_t> offsets;               // [local experts + 1] their first received rows
  int64_t received() const { return offsets.back(); }
};

// The router's losses of one micro-batch's forward, as expert_route.h defines them.
struct RouterLosses {
  double balance = 0, z = 0, entropy = 0;
};

// The routing of the micro-batches whose backward ran since it was last taken.
struct ExpertLoadSum {
  std::vector<int64_t> routed, dropped;  // per expert
  double balance = 0, entropy = 0;       // summed over the micro-batches
  int micro_batches = 0;
  // Expert parallelism: this rank's wall time in the expert group's exchanges (the counts'
  // all-gather and the all-to-alls of both passes), waiting for its peers included.
  double exchange_ms = 0;
};

class MoeMlp {
 public:
  void bind(const LayerBuild& build, const std::string& name);

  // Training: the slot's buffers keep what backward reads; scratch.exchanged stages the rows
  // that travel.
  void forward(Ops& ops, const Batch& batch, const Tensor& y, const Tensor& x,
               const ExpertGradients& scratch) const;
  // dx = input gradient (overwrites); parameter gradients accumulate. dloss: each token's
  // loss weight (the balancing and z losses weigh this micro-batch's tokens the same).
  // With batch.defer_weights (a split backward's input-gradient pass) every weight and bias
  // gradient (the experts', the shared experts', the router's) waits for backward_weights,
  // from copies kept in the slot.
  void backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dy, const Tensor& x,
                const ExpertGradients& grads, double dloss) const;
  void backward_weights(Ops& ops, const Batch& batch) const;
  // Inference over x [N, C] with buffers of the caller's (the decoder's); every expert here.
  void infer(Ops& ops, const Tensor& y, const Tensor& x, const ExpertBuffers& buffers) const;

  // The router's losses of the slot's last forward (read back from the device).
  RouterLosses router_losses(Ops& ops, int slot) const;
  ExpertLoadSum take_load(Ops& ops);
  // Puts the selection bias (as last set) and an empty step's load on the device: the model
  // calls it once its memory is laid out.
  void start(Ops& ops);
  // Aux-loss-free balancing's selection bias (expert_routing.h), which the trainer moves
  // between steps; set, it goes to the device at once (a captured step reads it there).
  const std::vector<double>& bias() const { return bias_; }
  void set_bias(Ops& ops, const std::vector<double>& bias);

 private:
  // Writes the rows' sizes and the exchange on the host; returns the milliseconds spent in
  // the expert group's exchanges.
  double run_forward(Ops& ops, const Tensor& y, const Tensor& x, const ExpertBuffers& buffers,
                     ExpertRows& rows, ExpertExchange& exchange, const Tensor& exchanged) const;
  // Its steps: the router and the routed experts' rows (in buffers.rows_out), the shared
  // experts' output into y, then the routed rows added to y with their gates.
  double route_and_compute(Ops& ops, const Tensor& x, const ExpertBuffers& buffers, ExpertRows& rows,
                           ExpertExchange& exchange, const Tensor& exchanged) const;
  // The router on the device, and the rows' offsets on the host.
  void route(Ops& ops, const Tensor& x, const ExpertBuffers& buffers, ExpertRows& rows) const;
  void shared_forward(Ops& ops, const Tensor& y, const Tensor& x, const ExpertBuffers& buffers) const;
  void combine(Ops& ops, const Tensor& y, const ExpertBuffers& buffers, const ExpertRows& rows) const;
  // Backward's: the shared experts' input gradient into dx (overwriting), then the routed
  // experts' added to it and the router's (by the rank that counts the tokens: each with whole
  // experts, else the first of the tensor group, which also counts the loads).
  void shared_backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dy, const Tensor& x,
                       const ExpertGradients& grads, const ExpertBuffers& buffers) const;
  void routed_backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dy, const Tensor& x,
                       const ExpertGradients& grads, double dloss, bool counts_tokens) const;
  // This rank's experts over their rows (expert-major, at offsets), and back.
  void experts_forward(Ops& ops, const ExpertBuffers& b, const std::vector<int64_t>& offsets) const;
  // defer: the slot's copies to keep what the weight gradients need in (null: computed now).
  struct KeptRows;
  void experts_backward(Ops& ops, const ExpertBuffers& b, const ExpertGradients& g,
                        const std::vector<int64_t>& offsets, const KeptRows* defer) const;
  // The experts' weight and bias gradients from their rows' output gradients (d_out, d_fc)
  // and inputs (hidden, in).
  void experts_weight_gradients(Ops& ops, const Tensor& d_out, const Tensor& hidden, const Tensor& d_fc,
                                const Tensor& in, const std::vector<int64_t>& offsets) const;
  // The router's weight gradient from its logits' gradient and its input ([N, E], [N, C]),
  // summed over the tensor group when each rank routed its own tokens.
  void router_weight_gradient(Ops& ops, const Tensor& d_logits, const Tensor& x) const;
  // This rank's share of a whole micro-batch's [N, C] rows under sequence parallelism.
  Tensor share_rows(const Tensor& whole) const;
  // Trades the per-expert counts over the expert group and lays out the received rows' order
  // in b.to_expert and b.to_rank.
  ExpertExchange plan_exchange(Ops& ops, const ExpertRows& rows, const ExpertBuffers& b) const;
  int64_t experts() const { return moe_.num_experts; }
  int64_t local_experts() const { return moe_.num_experts / ep(); }
  int ep() const { return expert_group_ ? expert_group_->size() : 1; }
  int tp() const { return tensor_group_ ? tensor_group_->size() : 1; }
  int etp() const { return whole_experts_ ? 1 : tp(); }

  MoeConfig moe_;
  bool swiglu_ = false, bias_terms_ = false;
  int64_t C_ = 0, F_ = 0, fc_width_ = 0;
  Parameter router_, fc_weight_, fc_bias_, proj_weight_, proj_bias_;  // the experts' this rank holds
  Communicator* expert_group_ = nullptr;
  Communicator* tensor_group_ = nullptr;
  const SequenceParallel* sequence_ = nullptr;
  bool whole_experts_ = false;  // parallel.etp=1 under tp > 1
  bool shared_ = false;
  Linear shared_fc_, shared_proj_;
  // Split over a tensor group, the shared experts' output bias, added once after the sum.
  bool shared_bias_once_ = false;
  Parameter shared_proj_bias_;
  std::vector<ExpertBuffers> slots_;
  // A split backward's copies, per slot (LayerBuild::weight_inputs): its rows' inputs and
  // hidden activations and both products' output gradients, kept from the input-gradient
  // pass to the weight pass (the slot's buffers may be recomputed for other layers between).
  struct KeptRows {
    Tensor in, hidden, d_out, d_fc;  // [R, C], [R, F], [R, C], [R, fc width]
    Tensor router_in, d_logits;      // the router's input and logits' gradient: [N, C], [N, E]
  };
  std::vector<KeptRows> kept_;
  // The selection bias [E] and the step's load [2E + 3] (routed, dropped, then the balancing
  // loss, the micro-batches and the entropy summed over micro-batches), on the device, so that
  // a captured step counts its loads as one run op by op does.
  Tensor device_bias_, device_load_;
  // Host state per slot: forward's rows and exchange, which backward reads (written through a
  // const forward as the device buffers are).
  mutable std::vector<ExpertRows> rows_;
  mutable std::vector<ExpertExchange> exchange_;
  mutable std::vector<double> forward_exchange_ms_;  // per slot, until its backward
  mutable double exchange_ms_ = 0;  // the step's, ExpertLoadSum's
  std::vector<double> bias_;
};

}  // namespace kiln
