#include "trainer/model/moe_mlp.h"

#include <algorithm>
#include <cmath>

#include "kernels/check.h"
#include "trainer/memory/host_copy.h"

namespace kiln {

namespace {

Tensor matrix(const Tensor& t) { return t.view({t.shape.rows(), t.shape.cols()}); }

struct Widths {
  int64_t E, k, C, F, fc, S, shared_fc, rows;
};

Widths widths(const ModelConfig& m, int64_t tokens) {
  const MoeConfig& moe = m.moe;
  const int64_t F = m.expert_ffn_dim(), S = int64_t{moe.shared_experts} * F;
  const int64_t gated = m.is_llama() ? 2 : 1;
  return {moe.num_experts, moe.top_k, m.d_model, F, gated * F, S, gated * S,
          max_expert_rows(moe, tokens)};
}

}  // namespace

ExpertBuffers ExpertBuffers::take(Arena& arena, const ModelConfig& model, int64_t tokens,
                                  DType dtype, DType stat_dtype) {
  const Widths w = widths(model, tokens);
  ExpertBuffers b;
  b.logits = arena.take({tokens, w.E}, dtype);
  b.source = arena.take({w.rows}, DType::I32);
  b.row_gate = arena.take({w.rows}, stat_dtype);
  b.choice_row = arena.take({tokens, w.k}, DType::I32);
  b.gate = arena.take({tokens, w.k}, stat_dtype);
  b.rows_in = arena.take({w.rows, w.C}, dtype);
  b.fc_out = arena.take({w.rows, w.fc}, dtype);
  b.hidden = arena.take({w.rows, w.F}, dtype);
  b.rows_out = arena.take({w.rows, w.C}, dtype);
  if (w.S > 0) {
    b.shared_fc = arena.take({tokens, w.shared_fc}, dtype);
    b.shared_hidden = arena.take({tokens, w.S}, dtype);
  }
  return b;
}

ExpertGradients ExpertGradients::take(Arena& arena, const ModelConfig& model, int64_t tokens,
                                      DType dtype, DType stat_dtype) {
  const Widths w = widths(model, tokens);
  ExpertGradients g;
  g.d_gate = arena.take({tokens, w.k}, stat_dtype);
  g.d_rows_out = arena.take({w.rows, w.C}, dtype);
  g.d_hidden = arena.take({w.rows, w.F}, dtype);
  g.d_fc = arena.take({w.rows, w.fc}, dtype);
  g.d_rows_in = arena.take({w.rows, w.C}, dtype);
  g.d_logits = arena.take({tokens, w.E}, dtype);
  if (w.S > 0) {
    g.d_shared_hidden = arena.take({tokens, w.S}, dtype);
    g.d_shared_fc = arena.take({tokens, w.shared_fc}, dtype);
  }
  return g;
}

void MoeMlp::bind(const LayerBuild& build, const std::string& name) {
  const ModelConfig& m = build.model;
  moe_ = m.moe;
  swiglu_ = m.is_llama();
  bias_terms_ = !m.is_llama();
  const int64_t tokens = build.micro_batch * m.seq_len;
  const Widths w = widths(m, tokens);
  C_ = w.C;
  F_ = w.F;
  fc_width_ = w.fc;
  const double proj_std = m.init_std / std::sqrt(2.0 * m.n_layer);
  // Parameters in the order backward produces their gradients.
  shared_ = w.S > 0;
  if (shared_) {
    shared_proj_.bind(build, name + ".shared.proj", w.S, w.C, bias_terms_, proj_std);
    shared_fc_.bind(build, name + ".shared.fc", w.C, w.shared_fc, bias_terms_, m.init_std);
  }
  ParameterSet& p = build.params;
  if (bias_terms_) proj_bias_ = p.add(name + ".experts.proj.bias", {w.E * w.C}, Init::Zeros);
  proj_weight_ = p.add(name + ".experts.proj.weight", {w.E * w.C, w.F}, Init::Normal, proj_std);
  if (bias_terms_) fc_bias_ = p.add(name + ".experts.fc.bias", {w.E * w.fc}, Init::Zeros);
  fc_weight_ = p.add(name + ".experts.fc.weight", {w.E * w.fc, w.C}, Init::Normal, m.init_std);
  router_ = p.add(name + ".router.weight", {w.E, w.C}, Init::Normal, m.init_std);
  slots_.clear();
  for (int s = 0; s < build.slots; ++s)
    slots_.push_back(ExpertBuffers::take(build.activations, m, tokens, build.dtype, build.stat_dtype));
  routing_.assign(static_cast<size_t>(build.slots), ExpertRouting{});
  logits_.assign(static_cast<size_t>(build.slots), {});
  load_ = ExpertLoadSum{std::vector<int64_t>(w.E, 0), std::vector<int64_t>(w.E, 0)};
  if (bias_.size() != static_cast<size_t>(w.E)) bias_.assign(static_cast<size_t>(w.E), 0.0);
}

void MoeMlp::forward(Ops& ops, const Batch& batch, const Tensor& y, const Tensor& x) const {
  const size_t s = static_cast<size_t>(batch.slot);
  run_forward(ops, matrix(y), matrix(x), slots_[s], routing_[s], logits_[s]);
}

void MoeMlp::infer(Ops& ops, const Tensor& y, const Tensor& x, const ExpertBuffers& buffers) const {
  ExpertRouting routing;
  std::vector<double> logits;
  run_forward(ops, matrix(y), matrix(x), buffers, routing, logits);
}

void MoeMlp::run_forward(Ops& ops, const Tensor& y, const Tensor& x, const ExpertBuffers& b,
                         ExpertRouting& routing, std::vector<double>& host_logits) const {
  const int64_t N = x.shape.rows(), E = experts();
  KILN_CHECK(N <= b.logits.shape[0], "moe: " + std::to_string(N) + " tokens exceed the layer's layout");
  const Tensor logits = b.logits.slice(0, N);
  ops.matmul(logits, x, false, router_.value, true, false);
  host_logits = copy_to_doubles(ops, logits);
  routing = route_tokens(moe_, host_logits, N, bias_);
  const int64_t M = routing.rows();
  ops.copy_from_host(b.source.slice(0, M), routing.source.data());
  copy_from_doubles(ops, b.row_gate.slice(0, M), routing.row_gate);
  ops.copy_from_host(b.choice_row.slice(0, N), routing.row.data());
  copy_from_doubles(ops, b.gate.slice(0, N), routing.gate);

  const Tensor rows_in = b.rows_in.slice(0, M), fc_out = b.fc_out.slice(0, M);
  const Tensor hidden = b.hidden.slice(0, M), rows_out = b.rows_out.slice(0, M);
  ops.gather_rows(rows_in, x, b.source.slice(0, M), Tensor{});
  for (int64_t e = 0; e < E; ++e) {
    const int64_t begin = routing.offsets[static_cast<size_t>(e)];
    const int64_t end = routing.offsets[static_cast<size_t>(e + 1)];
    if (begin == end) continue;
    ops.matmul(fc_out.slice(begin, end), rows_in.slice(begin, end), false,
               fc_weight_.value.slice(e * fc_width_, (e + 1) * fc_width_), true, false);
    if (bias_terms_)
      ops.add_bias(fc_out.slice(begin, end), fc_bias_.value.slice(e * fc_width_, (e + 1) * fc_width_));
  }
  if (M > 0) {
    if (swiglu_) ops.swiglu_forward(hidden, fc_out);
    else ops.gelu_forward(hidden, fc_out);
  }
  for (int64_t e = 0; e < E; ++e) {
    const int64_t begin = routing.offsets[static_cast<size_t>(e)];
    const int64_t end = routing.offsets[static_cast<size_t>(e + 1)];
    if (begin == end) continue;
    ops.matmul(rows_out.slice(begin, end), hidden.slice(begin, end), false,
               proj_weight_.value.slice(e * C_, (e + 1) * C_), true, false);
    if (bias_terms_) ops.add_bias(rows_out.slice(begin, end), proj_bias_.value.slice(e * C_, (e + 1) * C_));
  }
  if (shared_) {
    const Tensor shared_fc = b.shared_fc.slice(0, N), shared_hidden = b.shared_hidden.slice(0, N);
    shared_fc_.forward(ops, shared_fc, x);
    if (swiglu_) ops.swiglu_forward(shared_hidden, shared_fc);
    else ops.gelu_forward(shared_hidden, shared_fc);
    shared_proj_.forward(ops, y, shared_hidden);
  }
  ops.combine_rows(y, rows_out, b.choice_row.slice(0, N), b.gate.slice(0, N), shared_);
}

void MoeMlp::backward(Ops& ops, const Batch& batch, const Tensor& dx_in, const Tensor& dy_in,
                      const Tensor& x_in, const ExpertGradients& g, double dloss) const {
  const size_t s = static_cast<size_t>(batch.slot);
  const ExpertBuffers& b = slots_[s];
  const ExpertRouting& routing = routing_[s];
  const Tensor dx = matrix(dx_in), dy = matrix(dy_in), x = matrix(x_in);
  const int64_t N = x.shape.rows(), M = routing.rows(), E = experts();
  const Tensor choice_row = b.choice_row.slice(0, N);

  // The gates' gradients, then each expert row's output gradient: its gate times dy.
  const Tensor d_gate = g.d_gate.slice(0, N);
  ops.row_dots(d_gate, dy, b.rows_out.slice(0, M), choice_row);
  const Tensor d_rows_out = g.d_rows_out.slice(0, M), d_hidden = g.d_hidden.slice(0, M);
  const Tensor d_fc = g.d_fc.slice(0, M), d_rows_in = g.d_rows_in.slice(0, M);
  const Tensor rows_in = b.rows_in.slice(0, M), hidden = b.hidden.slice(0, M);
  ops.gather_rows(d_rows_out, dy, b.source.slice(0, M), b.row_gate.slice(0, M));
  for (int64_t e = 0; e < E; ++e) {
    const int64_t begin = routing.offsets[static_cast<size_t>(e)];
    const int64_t end = routing.offsets[static_cast<size_t>(e + 1)];
    if (begin == end) continue;
    const Tensor d_out = d_rows_out.slice(begin, end);
    if (bias_terms_) ops.bias_backward(proj_bias_.grad.slice(e * C_, (e + 1) * C_), d_out);
    ops.matmul(proj_weight_.grad.slice(e * C_, (e + 1) * C_), d_out, true, hidden.slice(begin, end),
               false, true);
    ops.matmul(d_hidden.slice(begin, end), d_out, false, proj_weight_.value.slice(e * C_, (e + 1) * C_),
               false, false);
  }
  if (M > 0) {
    if (swiglu_) ops.swiglu_backward(d_fc, b.fc_out.slice(0, M), d_hidden);
    else ops.gelu_backward(d_fc, b.fc_out.slice(0, M), d_hidden);
  }
  for (int64_t e = 0; e < E; ++e) {
    const int64_t begin = routing.offsets[static_cast<size_t>(e)];
    const int64_t end = routing.offsets[static_cast<size_t>(e + 1)];
    if (begin == end) continue;
    const Tensor d_fc_e = d_fc.slice(begin, end);
    if (bias_terms_) ops.bias_backward(fc_bias_.grad.slice(e * fc_width_, (e + 1) * fc_width_), d_fc_e);
    ops.matmul(fc_weight_.grad.slice(e * fc_width_, (e + 1) * fc_width_), d_fc_e, true,
               rows_in.slice(begin, end), false, true);
    ops.matmul(d_rows_in.slice(begin, end), d_fc_e, false,
               fc_weight_.value.slice(e * fc_width_, (e + 1) * fc_width_), false, false);
  }

  if (shared_) {
    const Tensor d_hid = g.d_shared_hidden.slice(0, N), d_sfc = g.d_shared_fc.slice(0, N);
    shared_proj_.backward(ops, d_hid, dy, b.shared_hidden.slice(0, N));
    if (swiglu_) ops.swiglu_backward(d_sfc, b.shared_fc.slice(0, N), d_hid);
    else ops.gelu_backward(d_sfc, b.shared_fc.slice(0, N), d_hid);
    shared_fc_.backward(ops, dx, d_sfc, x);
  }
  ops.combine_rows(dx, d_rows_in, choice_row, Tensor{}, shared_);

  // The router, through the host: each token's loss weight times the micro-batch's tokens is
  // the weight of its balancing and z losses (each a mean over those tokens).
  const std::vector<double> d_logits =
      route_backward(moe_, routing, logits_[s], copy_to_doubles(ops, d_gate), dloss * static_cast<double>(N));
  const Tensor d_logits_t = g.d_logits.slice(0, N);
  copy_from_doubles(ops, d_logits_t, d_logits);
  ops.matmul(router_.grad, d_logits_t, true, x, false, true);
  ops.matmul(dx, d_logits_t, false, router_.value, false, true);

  for (int64_t e = 0; e < E; ++e) {
    load_.routed[static_cast<size_t>(e)] += routing.routed[static_cast<size_t>(e)];
    load_.dropped[static_cast<size_t>(e)] += routing.dropped[static_cast<size_t>(e)];
  }
  load_.balance += routing.balance;
  load_.entropy += routing.entropy;
  ++load_.micro_batches;
}

ExpertLoadSum MoeMlp::take_load() {
  ExpertLoadSum taken = load_;
  load_ = ExpertLoadSum{std::vector<int64_t>(bias_.size(), 0), std::vector<int64_t>(bias_.size(), 0)};
  return taken;
}

void MoeMlp::set_bias(const std::vector<double>& bias) {
  KILN_CHECK(bias.size() == bias_.size(), "moe: a selection bias of " + std::to_string(bias.size()) +
                                              " experts for a layer of " + std::to_string(bias_.size()));
  bias_ = bias;
}

}  // namespace kiln
