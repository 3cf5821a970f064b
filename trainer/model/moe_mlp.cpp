#include "trainer/model/moe_mlp.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "kernels/expert_products.h"
#include "trainer/memory/host_copy.h"
#include "trainer/util/step_clock.h"

namespace kiln {

namespace {

// F, fc, S and shared_fc are this rank's: each expert's hidden units split over etp ranks,
// the shared experts' over tp. N: the tokens a rank routes, the micro-batch's or, with whole
// experts (etp < tp), its own share of them.
struct Widths {
  int64_t E, k, C, F, fc, S, shared_fc, N, rows, received;
};

Widths widths(const ModelConfig& m, int64_t tokens, int ep, int etp, int tp) {
  const MoeConfig& moe = m.moe;
  const int64_t F = m.expert_ffn_dim() / etp, S = int64_t{moe.shared_experts} * m.expert_ffn_dim() / tp;
  const int64_t gated = m.is_llama() ? 2 : 1, N = etp < tp ? tokens / tp : tokens;
  return {moe.num_experts, moe.top_k, m.d_model, F, gated * F, S, gated * S, N,
          max_expert_rows(moe, N), max_received_expert_rows(moe, N, ep)};
}

}  // namespace

ExpertBuffers ExpertBuffers::take(Arena& arena, const ModelConfig& model, int64_t tokens,
                                  DType dtype, DType stat_dtype, int ep, int etp, int tp) {
  const Widths w = widths(model, tokens, ep, etp, tp);
  ExpertBuffers b;
  b.logits = arena.take({w.N, w.E}, dtype);
  b.choice = arena.take({w.N, w.k}, DType::I32);
  b.choice_row = arena.take({w.N, w.k}, DType::I32);
  b.gate = arena.take({w.N, w.k}, stat_dtype);
  b.stats = arena.take({w.E + 2}, stat_dtype);
  b.counts = arena.take({2 * w.E}, stat_dtype);
  // With whole experts (etp < tp) the balancing loss weighs the whole micro-batch's choices,
  // summed over the tensor group; else this rank's own.
  b.shares = etp < tp ? arena.take({w.E}, stat_dtype) : b.counts.slice(0, w.E);
  b.offsets = arena.take({w.E + 1}, DType::I32);
  b.source = arena.take({w.rows}, DType::I32);
  b.row_gate = arena.take({w.rows}, stat_dtype);
  b.rows_in = arena.take({w.rows, w.C}, dtype);
  b.rows_out = arena.take({w.rows, w.C}, dtype);
  b.expert_in = ep > 1 ? arena.take({w.received, w.C}, dtype) : b.rows_in;
  b.fc_out = arena.take({w.received, w.fc}, dtype);
  b.hidden = arena.take({w.received, w.F}, dtype);
  b.expert_out = ep > 1 ? arena.take({w.received, w.C}, dtype) : b.rows_out;
  if (ep > 1) {
    b.to_expert = arena.take({w.received}, DType::I32);
    b.to_rank = arena.take({w.received}, DType::I32);
  }
  if (w.S > 0) {
    b.shared_fc = arena.take({tokens, w.shared_fc}, dtype);
    b.shared_hidden = arena.take({tokens, w.S}, dtype);
  }
  return b;
}

ExpertGradients ExpertGradients::take(Arena& arena, const ModelConfig& model, int64_t tokens,
                                      DType dtype, DType stat_dtype, int ep, int etp, int tp) {
  const Widths w = widths(model, tokens, ep, etp, tp);
  ExpertGradients g;
  g.d_gate = arena.take({w.N, w.k}, stat_dtype);
  g.d_rows_out = arena.take({w.rows, w.C}, dtype);
  g.d_rows_in = arena.take({w.rows, w.C}, dtype);
  g.d_expert_out = ep > 1 ? arena.take({w.received, w.C}, dtype) : g.d_rows_out;
  g.d_hidden = arena.take({w.received, w.F}, dtype);
  g.d_fc = arena.take({w.received, w.fc}, dtype);
  g.d_expert_in = ep > 1 ? arena.take({w.received, w.C}, dtype) : g.d_rows_in;
  if (ep > 1) g.exchanged = arena.take({w.received, w.C}, dtype);
  g.d_logits = arena.take({w.N, w.E}, dtype);
  if (w.S > 0) {
    g.d_shared_hidden = arena.take({tokens, w.S}, dtype);
    g.d_shared_fc = arena.take({tokens, w.shared_fc}, dtype);
  }
  if (tp > 1) g.whole = arena.take({tokens, w.C}, dtype);
  return g;
}

void MoeMlp::bind(const LayerBuild& build, const std::string& name) {
  const ModelConfig& m = build.model;
  moe_ = m.moe;
  swiglu_ = m.is_llama();
  bias_terms_ = !m.is_llama();
  expert_group_ = build.split.expert;
  tensor_group_ = build.split.tensor;
  sequence_ = build.sequence;
  whole_experts_ = build.split.whole_experts;
  const int ep = this->ep(), etp = this->etp(), tp = this->tp();
  const int64_t tokens = build.micro_batch * m.seq_len;
  const Widths w = widths(m, tokens, ep, etp, tp);
  C_ = w.C;
  F_ = w.F;
  fc_width_ = w.fc;
  const double proj_std = m.init_std / std::sqrt(2.0 * m.n_layer);
  // Parameters in the order backward produces their gradients. The router is whole on every
  // tensor-parallel rank, which routes every token (its own share with whole experts); the
  // shared experts are split as a dense MLP is (fc by rows, proj by columns, its bias whole
  // and added once).
  ParameterSet& p = build.params;
  shared_ = w.S > 0;
  if (shared_) {
    const int64_t S = w.S * tp;
    shared_bias_once_ = bias_terms_ && tp > 1;
    if (shared_bias_once_) shared_proj_bias_ = p.add(name + ".shared.proj.bias", {w.C}, Init::Zeros);
    shared_proj_.bind(build, name + ".shared.proj", w.S, w.C, bias_terms_ && !shared_bias_once_, proj_std,
                      build.split.split(1, {S}));
    shared_fc_.bind(build, name + ".shared.fc", w.C, w.shared_fc, bias_terms_, m.init_std,
                    build.split.split(0, swiglu_ ? std::vector<int64_t>{S, S} : std::vector<int64_t>{S}));
  }
  // The experts' stacks: this rank's E / ep experts, a block of rows of the whole over the
  // expert group; over an expert-tensor group, every expert's hidden units split as a dense
  // MLP's are (fc by rows, its gate and up halves each; proj by columns).
  const int64_t El = local_experts(), F = m.expert_ffn_dim();
  const auto stack = [&](const std::string& stack_name, Shape whole, Init init, double std,
                         TensorSplit split) {
    if (split.tensor_sharded()) whole.dims[split.dim] /= split.tp;
    if (!expert_group_) return p.add(stack_name, whole, init, std, -1, split);
    split.blocks = ep;
    split.block = build.split.ep_rank();
    whole.dims[0] /= ep;
    return p.add_expert(stack_name, whole, init, std, split);
  };
  std::vector<int64_t> fc_parts;  // one block's: this rank's experts' gate and up halves
  for (int64_t e = 0; e < El; ++e)
    for (int half = 0; half < (swiglu_ ? 2 : 1); ++half) fc_parts.push_back(F);
  if (bias_terms_) proj_bias_ = stack(name + ".experts.proj.bias", {w.E * w.C}, Init::Zeros, 0, {});
  proj_weight_ = stack(name + ".experts.proj.weight", {w.E * w.C, F}, Init::Normal, proj_std,
                       build.split.expert_split(1, {F}));
  if (bias_terms_)
    fc_bias_ = stack(name + ".experts.fc.bias", {w.E * F * (swiglu_ ? 2 : 1)}, Init::Zeros, 0,
                     build.split.expert_split(0, fc_parts));
  fc_weight_ = stack(name + ".experts.fc.weight", {w.E * F * (swiglu_ ? 2 : 1), w.C}, Init::Normal,
                     m.init_std, build.split.expert_split(0, fc_parts));
  KILN_CHECK(fc_weight_.value.shape[0] == El * w.fc, "moe: the experts' stack is not split evenly");
  router_ = p.add(name + ".router.weight", {w.E, w.C}, Init::Normal, m.init_std);
  slots_.clear();
  for (int s = 0; s < build.slots; ++s)
    slots_.push_back(
        ExpertBuffers::take(build.activations, m, tokens, build.dtype, build.stat_dtype, ep, etp, tp));
  device_bias_ = build.activations.take({w.E}, build.stat_dtype);
  device_load_ = build.activations.take({2 * w.E + 3}, build.stat_dtype);
  kept_.clear();
  if (build.weight_inputs) {
    const int64_t R = std::max(w.rows, w.received), N = build.micro_batch * build.seq();
    Arena& kept = *build.weight_inputs;
    for (int s = 0; s < build.slots; ++s)
      kept_.push_back({kept.take({R, w.C}, build.dtype), kept.take({R, w.F}, build.dtype), kept.take({R, w.C}, build.dtype),
                       kept.take({R, w.fc}, build.dtype), kept.take({N, w.C}, build.dtype),
                       kept.take({N, w.E}, build.dtype)});
  }
  rows_.assign(static_cast<size_t>(build.slots), ExpertRows{});
  exchange_.assign(static_cast<size_t>(build.slots), ExpertExchange{});
  forward_exchange_ms_.assign(static_cast<size_t>(build.slots), 0.0);
  exchange_ms_ = 0;
  if (bias_.size() != static_cast<size_t>(w.E)) bias_.assign(static_cast<size_t>(w.E), 0.0);
}

void MoeMlp::start(Ops& ops) {
  set_bias(ops, bias_);
  ops.fill(device_load_, 0.0);
}

void MoeMlp::forward(Ops& ops, const Batch& batch, const Tensor& y, const Tensor& x,
                     const ExpertGradients& scratch) const {
  const size_t s = static_cast<size_t>(batch.slot);
  const ExpertBuffers& b = slots_[s];
  if (whole_experts_) {
    // Each tensor rank routes its own tokens; the shared experts, split over the group, take
    // the whole micro-batch gathered and reduce-scatter their partial sums.
    const Tensor mine = as_matrix(x), out = as_matrix(y);
    forward_exchange_ms_[s] = route_and_compute(ops, mine, b, rows_[s], exchange_[s], scratch.exchanged);
    if (shared_) {
      const Tensor whole_x = as_matrix(sequence_->gather(batch, x));
      const Tensor whole_y = scratch.whole.slice(0, whole_x.shape.rows());
      shared_forward(ops, whole_y, whole_x, b);
      if (shared_bias_once_ && tensor_group_->rank() == 0) ops.add_bias(whole_y, shared_proj_bias_.value);
      sequence_->scatter(out, whole_y);
    }
    combine(ops, out, b, rows_[s]);
    return;
  }
  // Under sequence parallelism every rank routes the whole micro-batch, gathered, and keeps
  // its share of the output.
  const Tensor whole_x = sequence_ ? as_matrix(sequence_->gather(batch, x)) : as_matrix(x);
  const Tensor whole_y = sequence_ ? scratch.whole.slice(0, whole_x.shape.rows()) : as_matrix(y);
  forward_exchange_ms_[s] = run_forward(ops, whole_y, whole_x, b, rows_[s], exchange_[s], scratch.exchanged);
  const bool partial = shared_ && tp() > 1;
  if (sequence_ && partial) {
    sequence_->scatter(as_matrix(y), whole_y);
  } else if (sequence_) {
    ops.cast(as_matrix(y), share_rows(whole_y));
  } else if (partial) {
    tensor_group_->all_reduce(whole_y, ReduceOp::Sum);
  }
}

void MoeMlp::infer(Ops& ops, const Tensor& y, const Tensor& x, const ExpertBuffers& buffers) const {
  KILN_CHECK(ep() == 1, "moe: inference runs on one rank that holds every expert (parallel.ep=1)");
  ExpertRows rows;
  ExpertExchange exchange;
  run_forward(ops, as_matrix(y), as_matrix(x), buffers, rows, exchange, Tensor{});
}

ExpertExchange MoeMlp::plan_exchange(Ops& ops, const ExpertRows& routing, const ExpertBuffers& b) const {
  const int ep = this->ep(), me = expert_group_->rank();
  const int64_t E = experts(), El = local_experts();
  // Every rank's rows per expert: counts[q * E + e] rows of rank q go to expert e.
  std::vector<int64_t> mine(static_cast<size_t>(E)), counts(static_cast<size_t>(ep * E));
  for (int64_t e = 0; e < E; ++e)
    mine[static_cast<size_t>(e)] = routing.offsets[static_cast<size_t>(e + 1)] - routing.offsets[static_cast<size_t>(e)];
  expert_group_->all_gather(Tensor{counts.data(), DType::I64, {ep * E}}, Tensor{mine.data(), DType::I64, {E}});
  const auto count = [&](int q, int64_t local) {
    return counts[static_cast<size_t>(q * E + me * El + local)];
  };
  ExpertExchange x;
  x.offsets.assign(static_cast<size_t>(El + 1), 0);
  for (int q = 0; q < ep; ++q) {
    x.send_rows.push_back(routing.offsets[static_cast<size_t>((q + 1) * El)] -
                          routing.offsets[static_cast<size_t>(q * El)]);
    int64_t from_q = 0;
    for (int64_t j = 0; j < El; ++j) {
      from_q += count(q, j);
      x.offsets[static_cast<size_t>(j + 1)] += count(q, j);
    }
    x.recv_rows.push_back(from_q);
  }
  for (int64_t j = 0; j < El; ++j) x.offsets[static_cast<size_t>(j + 1)] += x.offsets[static_cast<size_t>(j)];
  const int64_t R = x.received();
  KILN_CHECK(R <= b.expert_in.shape[0], "moe: " + std::to_string(R) + " rows received exceed the layer's layout of " +
                                            std::to_string(b.expert_in.shape[0]));
  // The rows arrive rank by rank, each rank's expert by expert; the experts take them
  // expert by expert, rank by rank.
  std::vector<int32_t> to_expert(static_cast<size_t>(R)), to_rank(static_cast<size_t>(R));
  std::vector<int64_t> next(x.offsets.begin(), x.offsets.end() - 1);
  int64_t arrived = 0;
  for (int q = 0; q < ep; ++q)
    for (int64_t j = 0; j < El; ++j)
      for (int64_t i = 0; i < count(q, j); ++i, ++arrived) {
        const int64_t at = next[static_cast<size_t>(j)]++;
        to_expert[static_cast<size_t>(at)] = static_cast<int32_t>(arrived);
        to_rank[static_cast<size_t>(arrived)] = static_cast<int32_t>(at);
      }
  if (R > 0) {
    ops.copy_from_host(b.to_expert.slice(0, R), to_expert.data());
    ops.copy_from_host(b.to_rank.slice(0, R), to_rank.data());
  }
  return x;
}

double MoeMlp::run_forward(Ops& ops, const Tensor& y, const Tensor& x, const ExpertBuffers& b, ExpertRows& rows,
                           ExpertExchange& exchange, const Tensor& exchanged) const {
  const double exchange_ms = route_and_compute(ops, x, b, rows, exchange, exchanged);
  if (shared_) shared_forward(ops, y, x, b);
  // Split over a tensor group, the shared experts' output is a partial sum the caller sums
  // over the group: the routed output and the bias go in on its first rank only.
  if (!shared_ || tp() == 1 || tensor_group_->rank() == 0) {
    if (shared_bias_once_) ops.add_bias(y, shared_proj_bias_.value);
    combine(ops, y, b, rows);
  }
  return exchange_ms;
}

void MoeMlp::route(Ops& ops, const Tensor& x, const ExpertBuffers& b, ExpertRows& rows) const {
  const int64_t N = x.shape.rows(), E = experts();
  KILN_CHECK(N <= b.logits.shape[0], "moe: " + std::to_string(N) + " tokens exceed the layer's layout");
  rows.tokens = N;
  rows.balance_tokens = N;
  rows.rule = route_rule(moe_, N);
  const Tensor logits = b.logits.slice(0, N), choice = b.choice.slice(0, N), gate = b.gate.slice(0, N);
  ops.matmul(logits, x, false, router_.value, true, false);
  ops.route_tokens(choice, gate, b.stats, logits, device_bias_, rows.rule);
  ops.route_rows(b.choice_row.slice(0, N), b.source, b.row_gate, b.offsets, b.counts, choice, gate, rows.rule);
  if (whole_experts_) {
    // Each tensor rank routed its own share of the micro-batch: the balancing loss weighs the
    // probabilities by the whole micro-batch's choices, so the shares' losses and gradients
    // add up to the whole's (the shares are equal: sequence parallelism splits evenly).
    ops.cast(b.shares, b.counts.slice(0, E));
    tensor_group_->all_reduce(b.shares, ReduceOp::Sum);
    rows.balance_tokens = N * tp();
  }
  // The products and the exchange are sized on the host: by the capacity when every expert's
  // rows are padded to it, else by the offsets read back.
  rows.offsets.assign(static_cast<size_t>(E + 1), 0);
  if (rows.rule.pad) {
    for (int64_t e = 0; e <= E; ++e) rows.offsets[static_cast<size_t>(e)] = e * rows.rule.capacity;
    return;
  }
  std::vector<int32_t> offsets(static_cast<size_t>(E + 1));
  ops.copy_to_host(offsets.data(), b.offsets);
  std::copy(offsets.begin(), offsets.end(), rows.offsets.begin());
}

double MoeMlp::route_and_compute(Ops& ops, const Tensor& x, const ExpertBuffers& b, ExpertRows& routing,
                                 ExpertExchange& exchange, const Tensor& exchanged) const {
  double exchange_ms = 0;
  route(ops, x, b, routing);
  const int64_t M = routing.rows();
  const Tensor rows_in = b.rows_in.slice(0, M), rows_out = b.rows_out.slice(0, M);
  ops.gather_rows(rows_in, x, b.source.slice(0, M), Tensor{});
  if (ep() == 1) {
    exchange.offsets = routing.offsets;
    experts_forward(ops, b, exchange.offsets);
    return 0;
  }
  // The rows travel to their experts' ranks and come back computed, staged in rank order.
  Clock::time_point start = Clock::now();
  exchange = plan_exchange(ops, routing, b);
  const int64_t R = exchange.received();
  const Tensor staged = exchanged.slice(0, R);
  expert_group_->all_to_all(staged, exchange.recv_rows, rows_in, exchange.send_rows);
  exchange_ms += ms_since(start);
  if (R > 0) ops.gather_rows(b.expert_in.slice(0, R), staged, b.to_expert.slice(0, R), Tensor{});
  experts_forward(ops, b, exchange.offsets);
  if (R > 0) ops.gather_rows(staged, b.expert_out.slice(0, R), b.to_rank.slice(0, R), Tensor{});
  start = Clock::now();
  expert_group_->all_to_all(rows_out, exchange.send_rows, staged, exchange.recv_rows);
  return exchange_ms + ms_since(start);
}

void MoeMlp::shared_forward(Ops& ops, const Tensor& y, const Tensor& x, const ExpertBuffers& b) const {
  const int64_t N = x.shape.rows();
  const Tensor shared_fc = b.shared_fc.slice(0, N), shared_hidden = b.shared_hidden.slice(0, N);
  shared_fc_.forward(ops, shared_fc, x);
  if (swiglu_) ops.swiglu_forward(shared_hidden, shared_fc);
  else ops.gelu_forward(shared_hidden, shared_fc);
  shared_proj_.forward(ops, y, shared_hidden);
}

void MoeMlp::combine(Ops& ops, const Tensor& y, const ExpertBuffers& b, const ExpertRows& routing) const {
  const int64_t N = routing.tokens;
  ops.combine_rows(y, b.rows_out.slice(0, routing.rows()), b.choice_row.slice(0, N), b.gate.slice(0, N),
                   shared_);
}

void MoeMlp::experts_forward(Ops& ops, const ExpertBuffers& b, const std::vector<int64_t>& offsets) const {
  const int64_t R = offsets.back();
  const Tensor in = b.expert_in.slice(0, R), fc_out = b.fc_out.slice(0, R);
  const Tensor hidden = b.hidden.slice(0, R), out = b.expert_out.slice(0, R);
  ops.expert_matmul(fc_out, in, fc_weight_.value, true, offsets);
  if (bias_terms_)
    for_each_expert(offsets, [&](int64_t e, int64_t begin, int64_t end) {
      ops.add_bias(fc_out.slice(begin, end), expert_rows(fc_bias_.value, e, fc_width_));
    });
  if (R > 0) {
    if (swiglu_) ops.swiglu_forward(hidden, fc_out);
    else ops.gelu_forward(hidden, fc_out);
  }
  ops.expert_matmul(out, hidden, proj_weight_.value, true, offsets);
  // Split over a tensor group, each rank computed its share of the hidden units: the outputs
  // are sums over the group, which then take their biases once.
  if (etp() > 1) tensor_group_->all_reduce(out, ReduceOp::Sum);
  if (bias_terms_)
    for_each_expert(offsets, [&](int64_t e, int64_t begin, int64_t end) {
      ops.add_bias(out.slice(begin, end), expert_rows(proj_bias_.value, e, C_));
    });
}

void MoeMlp::experts_backward(Ops& ops, const ExpertBuffers& b, const ExpertGradients& g,
                              const std::vector<int64_t>& offsets, const KeptRows* defer) const {
  const int64_t R = offsets.back();
  const Tensor d_out = g.d_expert_out.slice(0, R), d_hidden = g.d_hidden.slice(0, R);
  const Tensor d_fc = g.d_fc.slice(0, R), d_in = g.d_expert_in.slice(0, R);
  const Tensor in = b.expert_in.slice(0, R), hidden = b.hidden.slice(0, R);
  ops.expert_matmul(d_hidden, d_out, proj_weight_.value, false, offsets);
  if (R > 0) {
    if (swiglu_) ops.swiglu_backward(d_fc, b.fc_out.slice(0, R), d_hidden);
    else ops.gelu_backward(d_fc, b.fc_out.slice(0, R), d_hidden);
  }
  ops.expert_matmul(d_in, d_fc, fc_weight_.value, false, offsets);
  if (!defer) return experts_weight_gradients(ops, d_out, hidden, d_fc, in, offsets);
  if (R == 0) return;
  ops.cast(defer->in.slice(0, R), in);
  ops.cast(defer->hidden.slice(0, R), hidden);
  ops.cast(defer->d_out.slice(0, R), d_out);
  ops.cast(defer->d_fc.slice(0, R), d_fc);
}

void MoeMlp::experts_weight_gradients(Ops& ops, const Tensor& d_out, const Tensor& hidden, const Tensor& d_fc,
                                      const Tensor& in, const std::vector<int64_t>& offsets) const {
  if (bias_terms_)
    for_each_expert(offsets, [&](int64_t e, int64_t begin, int64_t end) {
      ops.bias_backward(expert_rows(proj_bias_.grad, e, C_), d_out.slice(begin, end));
    });
  ops.expert_weight_grad(proj_weight_.grad, d_out, hidden, offsets);
  if (bias_terms_)
    for_each_expert(offsets, [&](int64_t e, int64_t begin, int64_t end) {
      ops.bias_backward(expert_rows(fc_bias_.grad, e, fc_width_), d_fc.slice(begin, end));
    });
  ops.expert_weight_grad(fc_weight_.grad, d_fc, in, offsets);
}

void MoeMlp::backward_weights(Ops& ops, const Batch& batch) const {
  const size_t s = static_cast<size_t>(batch.slot);
  const std::vector<int64_t>& offsets = exchange_[s].offsets;
  const int64_t R = offsets.back();
  const KeptRows& k = kept_[s];
  experts_weight_gradients(ops, k.d_out.slice(0, R), k.hidden.slice(0, R), k.d_fc.slice(0, R), k.in.slice(0, R),
                           offsets);
  const int64_t N = rows_[s].tokens;
  router_weight_gradient(ops, k.d_logits.slice(0, N), k.router_in.slice(0, N));
  if (!shared_) return;
  // The shared experts ran over the whole micro-batch's rows (gathered under sequence
  // parallelism), in backward's order.
  const int64_t whole = batch.b * batch.t;
  if (shared_bias_once_)
    ops.bias_backward(shared_proj_bias_.grad, shared_proj_.kept_output_gradient(batch.slot, whole));
  shared_proj_.backward_weights(ops, batch.slot, whole);
  shared_fc_.backward_weights(ops, batch.slot, whole);
}

void MoeMlp::backward(Ops& ops, const Batch& batch, const Tensor& dx_in, const Tensor& dy_in,
                      const Tensor& x_in, const ExpertGradients& g, double dloss) const {
  if (whole_experts_) {
    // The shared experts' input gradient, a partial sum over the whole micro-batch, is
    // reduce-scattered; the routed experts' and the router's add this rank's tokens' own.
    const Tensor dx = as_matrix(dx_in);
    if (shared_) {
      const Tensor whole_x = as_matrix(sequence_->gather(batch, x_in));
      const Tensor whole_dy = as_matrix(sequence_->gather_gradient(batch, dy_in));
      const Tensor whole_dx = g.whole.slice(0, whole_x.shape.rows());
      shared_backward(ops, batch, whole_dx, whole_dy, whole_x, g, slots_[static_cast<size_t>(batch.slot)]);
      sequence_->scatter(dx, whole_dx);
    }
    routed_backward(ops, batch, dx, as_matrix(dy_in), as_matrix(x_in), g, dloss, true);
    return;
  }
  // Under tensor parallelism every rank computes over the whole micro-batch (gathered under
  // sequence parallelism); the input gradient is a partial sum over the group, into which
  // the part every rank computes alike (the router's) goes in on its first rank only.
  const Tensor x = sequence_ ? as_matrix(sequence_->gather(batch, x_in)) : as_matrix(x_in);
  const Tensor dy = sequence_ ? as_matrix(sequence_->gather_gradient(batch, dy_in)) : as_matrix(dy_in);
  const Tensor dx = sequence_ ? g.whole.slice(0, x.shape.rows()) : as_matrix(dx_in);
  if (shared_) shared_backward(ops, batch, dx, dy, x, g, slots_[static_cast<size_t>(batch.slot)]);
  routed_backward(ops, batch, dx, dy, x, g, dloss, tp() == 1 || tensor_group_->rank() == 0);
  if (sequence_) {
    sequence_->scatter(as_matrix(dx_in), dx);
  } else if (tp() > 1) {
    tensor_group_->all_reduce(dx, ReduceOp::Sum);
  }
}

void MoeMlp::shared_backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dy, const Tensor& x,
                             const ExpertGradients& g, const ExpertBuffers& b) const {
  const int64_t N = x.shape.rows();
  const Tensor d_hid = g.d_shared_hidden.slice(0, N), d_sfc = g.d_shared_fc.slice(0, N);
  if (shared_bias_once_ && !batch.defer_weights) ops.bias_backward(shared_proj_bias_.grad, dy);
  shared_proj_.backward(ops, batch, d_hid, dy, b.shared_hidden.slice(0, N));
  if (swiglu_) ops.swiglu_backward(d_sfc, b.shared_fc.slice(0, N), d_hid);
  else ops.gelu_backward(d_sfc, b.shared_fc.slice(0, N), d_hid);
  shared_fc_.backward(ops, batch, dx, d_sfc, x);
}

void MoeMlp::routed_backward(Ops& ops, const Batch& batch, const Tensor& dx, const Tensor& dy, const Tensor& x,
                             const ExpertGradients& g, double dloss, bool counts_tokens) const {
  const size_t s = static_cast<size_t>(batch.slot);
  const ExpertBuffers& b = slots_[s];
  const ExpertRows& routing = rows_[s];
  const ExpertExchange& exchange = exchange_[s];
  const int64_t N = x.shape.rows(), M = routing.rows(), E = experts();
  const Tensor choice_row = b.choice_row.slice(0, N);

  // The gates' gradients, then each expert row's output gradient: its gate times dy.
  const Tensor d_gate = g.d_gate.slice(0, N);
  ops.row_dots(d_gate, dy, b.rows_out.slice(0, M), choice_row);
  const Tensor d_rows_out = g.d_rows_out.slice(0, M), d_rows_in = g.d_rows_in.slice(0, M);
  ops.gather_rows(d_rows_out, dy, b.source.slice(0, M), b.row_gate.slice(0, M));
  if (ep() == 1) {
    experts_backward(ops, b, g, exchange.offsets, batch.defer_weights ? &kept_[s] : nullptr);
  } else {
    // The output gradients go where their rows were computed, the input gradients back.
    const int64_t R = exchange.received();
    const Tensor staged = g.exchanged.slice(0, R);
    Clock::time_point start = Clock::now();
    expert_group_->all_to_all(staged, exchange.recv_rows, d_rows_out, exchange.send_rows);
    exchange_ms_ += ms_since(start);
    if (R > 0) ops.gather_rows(g.d_expert_out.slice(0, R), staged, b.to_expert.slice(0, R), Tensor{});
    experts_backward(ops, b, g, exchange.offsets, batch.defer_weights ? &kept_[s] : nullptr);
    if (R > 0) ops.gather_rows(staged, g.d_expert_in.slice(0, R), b.to_rank.slice(0, R), Tensor{});
    start = Clock::now();
    expert_group_->all_to_all(d_rows_in, exchange.send_rows, staged, exchange.recv_rows);
    exchange_ms_ += ms_since(start) + forward_exchange_ms_[s];
  }
  ops.combine_rows(dx, d_rows_in, choice_row, Tensor{}, shared_);

  // The router: each token's loss weight times the micro-batch's tokens is the weight of its
  // balancing and z losses (each a mean over those tokens). The step's loads are counted once:
  // on each tensor rank with whole experts (each routed its own tokens), else on the first
  // (every rank routed the same). With whole experts each tensor rank saw its own tokens: the
  // router's gradient is summed over the group.
  const double weight = dloss * static_cast<double>(N);
  const RouteLoss loss{routing.balance_tokens, weight * moe_.aux_loss_coeff, weight * moe_.z_loss_coeff};
  const Tensor d_logits_t = g.d_logits.slice(0, N);
  ops.route_backward(d_logits_t, counts_tokens ? device_load_.slice(2 * E, 2 * E + 2) : Tensor{}, d_gate,
                     b.logits.slice(0, N), b.choice.slice(0, N), b.stats, b.shares, routing.rule, loss);
  if (!batch.defer_weights) {
    router_weight_gradient(ops, d_logits_t, x);
  } else if (!router_.frozen) {
    ops.cast(kept_[s].d_logits.slice(0, N), d_logits_t);
    ops.cast(kept_[s].router_in.slice(0, N), x);
  }
  if (counts_tokens) ops.matmul(dx, d_logits_t, false, router_.value, false, true);

  if (!counts_tokens) return;
  const Tensor counted = device_load_.slice(0, 2 * E), entropy = device_load_.slice(2 * E + 2, 2 * E + 3);
  ops.add(counted, counted, b.counts);
  ops.add(entropy, entropy, b.stats.slice(E, E + 1));
}

void MoeMlp::router_weight_gradient(Ops& ops, const Tensor& d_logits, const Tensor& x) const {
  if (router_.frozen) return;
  ShareGradients(whole_experts_ ? sequence_ : nullptr).sum(ops, {&router_}, [&] {
    ops.matmul(router_.grad, d_logits, true, x, false, true);
  });
}

Tensor MoeMlp::share_rows(const Tensor& whole) const {
  const int64_t n = whole.shape.rows() / tp(), r = tensor_group_->rank();
  return whole.slice(r * n, (r + 1) * n);
}

RouterLosses MoeMlp::router_losses(Ops& ops, int slot) const {
  const ExpertBuffers& b = slots_[static_cast<size_t>(slot)];
  const ExpertRows& rows = rows_[static_cast<size_t>(slot)];
  const int64_t E = experts();
  const std::vector<double> stats = copy_to_doubles(ops, b.stats), shares = copy_to_doubles(ops, b.shares);
  RouterLosses losses{0, stats[static_cast<size_t>(E + 1)], stats[static_cast<size_t>(E)]};
  const double N = static_cast<double>(rows.tokens), choices = static_cast<double>(rows.balance_tokens * moe_.top_k);
  for (int64_t e = 0; e < E; ++e)
    losses.balance += static_cast<double>(E) * (stats[static_cast<size_t>(e)] / N) * shares[static_cast<size_t>(e)] / choices;
  return losses;
}

ExpertLoadSum MoeMlp::take_load(Ops& ops) {
  const int64_t E = experts();
  const std::vector<double> load = copy_to_doubles(ops, device_load_);
  ops.fill(device_load_, 0.0);
  ExpertLoadSum taken;
  for (int64_t e = 0; e < E; ++e) {
    taken.routed.push_back(std::llround(load[static_cast<size_t>(e)]));
    taken.dropped.push_back(std::llround(load[static_cast<size_t>(E + e)]));
  }
  taken.balance = load[static_cast<size_t>(2 * E)];
  taken.micro_batches = static_cast<int>(std::llround(load[static_cast<size_t>(2 * E + 1)]));
  taken.entropy = load[static_cast<size_t>(2 * E + 2)];
  taken.exchange_ms = exchange_ms_;
  exchange_ms_ = 0;
  return taken;
}

void MoeMlp::set_bias(Ops& ops, const std::vector<double>& bias) {
  KILN_CHECK(bias.size() == bias_.size(), "moe: a selection bias of " + std::to_string(bias.size()) +
                                              " experts for a layer of " + std::to_string(bias_.size()));
  bias_ = bias;
  copy_from_doubles(ops, device_bias_, bias_);
}

}  // namespace kiln
