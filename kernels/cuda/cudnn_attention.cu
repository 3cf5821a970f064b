// cuDNN's fused flash attention, written directly against cuDNN's graph (backend) API: there
// is no cudnn-frontend here. The two graphs are the patterns cuDNN's fused-attention engines
// recognise, node for node as NVIDIA's cudnn-frontend lowers sdpa(causal, generate_stats)
// and sdpa_backward(causal) for cuDNN 9 before 9.21 (its "composite" SDPA nodes):
//
//   forward   S = scale * Q K^T, causal mask (row >= column keeps the score), softmax with
//             Stats = max + log(sum exp), O = softmax(S) V
//   backward  softmax_sum = rowsum(dO * O); P = exp(scale * Q K^T - Stats) under the mask;
//             dV = P^T dO; dS = P * (dO V^T - softmax_sum) * scale; dK = dS^T Q;
//             dQ = dS K accumulated in float, then converted
//
// Grouped-query heads: K and V keep their n_kv_head heads and the products broadcast them
// over each group's query heads (query head h reads key/value head h / group, as kiln's
// kernels do); dK and dV are summed over the group by a reduction.
//
// Checked without a GPU (cuDNN 9.19, plans built against device-properties descriptors of an
// H100 and an A100, a stub driver): both graphs pass the fused-attention engines' pattern
// match for plain and grouped heads, head dims 64 and 128, bf16 and fp16, the heuristics
// offer engines and their kernels compile; a graph without the exponential is refused.
// What only a GPU can confirm: that the kernels load and compute the right numbers with
// kiln's strided views, the float dtypes left to the intermediates (as the frontend leaves
// them), and the workspace tensors (softmax_sum, the dQ accumulator) the backward binds.
// kernels/cuda/cudnn_attention_cuda_test.cpp holds them to the CPU.
#include "kernels/cuda/cudnn_attention.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "base/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cudnn_library.h"

namespace kiln::cuda {
namespace {

using Dims = std::array<int64_t, 4>;

// The ids of the tensors a call binds to memory; constants and intermediates take ids from
// kFirstInternal on.
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kSoftmaxSum,  // backward: rowsum(dO * O) in float, in the workspace
  kDQAccum,     // backward: dQ accumulated in float, in the workspace
  kFirstInternal = 100,
};

// Shapes cached with their plans; a run uses one or two (training, evaluation).
constexpr size_t kCachedShapes = 8;
// Offsets inside the workspace keep each part aligned as cudaMalloc's memory is.
constexpr size_t kAlign = 256;

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

Dims contiguous(const Dims& d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }

// One backend descriptor, destroyed with its owner.
class Descriptor {
 public:
  Descriptor(const CudnnLibrary& lib, cudnnBackendDescriptorType_t type) : lib_(&lib) {
    lib.check(lib.create_descriptor(type, &desc_),
              "cudnnBackendCreateDescriptor(" + std::to_string(type) + ")");
  }
  ~Descriptor() {
    if (desc_ != nullptr) lib_->destroy_descriptor(desc_);
  }
  Descriptor(Descriptor&& other) noexcept
      : lib_(other.lib_), desc_(std::exchange(other.desc_, nullptr)) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Descriptor& operator=(Descriptor&&) = delete;

  cudnnBackendDescriptor_t get() const { return desc_; }
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
           const void* values) {
    lib_->check(lib_->set_attribute(desc_, name, type, count, values),
                "cudnnBackendSetAttribute(" + std::to_string(name) + ")");
  }
  void set(cudnnBackendAttributeName_t name, const Descriptor& value) {
    const cudnnBackendDescriptor_t raw = value.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
  }
  void finalize() { lib_->check(lib_->finalize(desc_), "cudnnBackendFinalize"); }

 private:
  const CudnnLibrary* lib_;
  cudnnBackendDescriptor_t desc_ = nullptr;
};

// An operation graph under construction, then its execution plan. Tensors are named by
// their unique ids; every descriptor lives as long as the plan.
class Graph {
 public:
  explicit Graph(const CudnnLibrary& lib) : lib_(lib) {}

  // A tensor the call binds to memory.
  void bind(int64_t uid, Dims dims, Dims strides, cudnnDataType_t type) {
    tensor(uid, dims, strides, type, false, false);
  }
  // A float constant, passed by value (from the host) at each execution.
  int64_t constant(float value) {
    const int64_t uid = next_uid_++;
    tensor(uid, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, false, true);
    constants_.emplace_back(uid, value);
    return uid;
  }
  // An intermediate that never reaches memory.
  int64_t temp(Dims dims, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    const int64_t uid = next_uid_++;
    tensor(uid, dims, contiguous(dims), type, true, false);
    return uid;
  }
  // y = mode(x[, b[, t]]): into `y`, or a new float intermediate of the inputs' broadcast shape.
  int64_t pointwise(cudnnPointwiseMode_t mode, std::vector<int64_t> in, int64_t y = 0,
                    cudnnDataType_t compute = CUDNN_DATA_FLOAT, int64_t axis = -1) {
    if (y == 0) {
      Dims dims = dims_.at(in[0]);
      for (int64_t t : in)
        for (size_t i = 0; i < dims.size(); ++i) dims[i] = std::max(dims[i], dims_.at(t)[i]);
      y = temp(dims);
    }
    Descriptor pw(lib_, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    if (axis >= 0) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    pw.finalize();
    Descriptor op(lib_, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    const cudnnBackendAttributeName_t ports[] = {CUDNN_ATTR_OPERATION_POINTWISE_XDESC,
                                                 CUDNN_ATTR_OPERATION_POINTWISE_BDESC,
                                                 CUDNN_ATTR_OPERATION_POINTWISE_TDESC};
    for (size_t i = 0; i < in.size(); ++i) op.set(ports[i], tensor_of(in[i]));
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, tensor_of(y));
    add_operation(std::move(op));
    keep_.push_back(std::move(pw));
    return y;
  }
  // y = a b over the last two dims, batched over the first two (b's heads broadcast over a's).
  int64_t matmul(int64_t a, int64_t b, int64_t y = 0) {
    if (y == 0) {
      const Dims& da = dims_.at(a);
      const Dims& db = dims_.at(b);
      y = temp({std::max(da[0], db[0]), std::max(da[1], db[1]), da[2], db[3]});
    }
    Descriptor mm(lib_, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    mm.finalize();
    Descriptor op(lib_, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, tensor_of(a));
    op.set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, tensor_of(b));
    op.set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, tensor_of(y));
    op.set(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
    add_operation(std::move(op));
    keep_.push_back(std::move(mm));
    return y;
  }
  // y = x reduced over every dim where y is smaller: by default the last (a row of scores).
  int64_t reduce(cudnnReduceTensorOp_t mode, int64_t x, int64_t y = 0) {
    if (y == 0) {
      Dims dims = dims_.at(x);
      dims[3] = 1;
      y = temp(dims);
    }
    Descriptor red(lib_, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
    red.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    red.finalize();
    Descriptor op(lib_, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, tensor_of(x));
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, tensor_of(y));
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red);
    add_operation(std::move(op));
    keep_.push_back(std::move(red));
    return y;
  }
  // A view of x with other dims and strides (the graphs' transposes).
  int64_t reshape(int64_t x, Dims dims, Dims strides, cudnnDataType_t type) {
    const int64_t y = next_uid_++;
    tensor(y, dims, strides, type, true, false);
    Descriptor op(lib_, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, tensor_of(x));
    op.set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, tensor_of(y));
    add_operation(std::move(op));
    return y;
  }
  // Scores with the causal mask: a key after the query (column > row) gets the lowest float,
  // which the softmax turns into zero.
  int64_t causal_mask(int64_t scores) {
    const Dims dims = dims_.at(scores);
    const int64_t row = pointwise(CUDNN_POINTWISE_GEN_INDEX, {scores},
                                  temp(dims, CUDNN_DATA_INT32), CUDNN_DATA_INT32, 2);
    const int64_t column = pointwise(CUDNN_POINTWISE_GEN_INDEX, {scores},
                                     temp(dims, CUDNN_DATA_INT32), CUDNN_DATA_INT32, 3);
    const int64_t keep = pointwise(CUDNN_POINTWISE_CMP_GE, {row, column},
                                   temp(dims, CUDNN_DATA_BOOLEAN), CUDNN_DATA_BOOLEAN);
    const int64_t lowest = constant(std::numeric_limits<float>::lowest());
    return pointwise(CUDNN_POINTWISE_BINARY_SELECT, {scores, lowest, keep});
  }

  // The operation graph, then the first engine of cuDNN's heuristics (mode A) whose plan
  // finalizes on this device. Throws kiln::Error when none does.
  void build(cudnnHandle_t handle) {
    Descriptor graph(lib_, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
              static_cast<int64_t>(operations_.size()), operations_.data());
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    graph.finalize();
    Descriptor heuristics(lib_, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    heuristics.finalize();
    // The results are engine configurations the caller creates and cuDNN fills.
    int64_t count = 0;
    lib_.check(lib_.get_attribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                  CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
               "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS)");
    std::vector<Descriptor> configs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (int64_t i = 0; i < count; ++i) {
      configs.emplace_back(lib_, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      raw.push_back(configs.back().get());
    }
    lib_.check(lib_.get_attribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                  CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, raw.data()),
               "cudnnBackendGetAttribute(ENGINEHEUR_RESULTS)");
    for (int64_t i = 0; i < count; ++i) {
      Descriptor plan(lib_, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[static_cast<size_t>(i)]);
      if (lib_.finalize(plan.get()) != CUDNN_STATUS_SUCCESS) continue;
      int64_t got = 0;
      lib_.check(lib_.get_attribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                    CUDNN_TYPE_INT64, 1, &got, &workspace_),
                 "cudnnBackendGetAttribute(EXECUTION_PLAN_WORKSPACE_SIZE)");
      plan_.emplace_back(std::move(plan));
      keep_.push_back(std::move(graph));
      for (Descriptor& c : configs) keep_.push_back(std::move(c));
      return;
    }
    fail("none of the " + std::to_string(count) +
         " engines cuDNN's heuristics offered builds a plan for this graph");
  }
  // cuDNN's own workspace bytes for the plan.
  size_t workspace() const { return static_cast<size_t>(workspace_); }
  // Runs the plan on the handle's stream with the tensors bound to `memory`.
  void execute(cudnnHandle_t handle, const std::vector<std::pair<int64_t, void*>>& memory,
               void* workspace) {
    std::vector<int64_t> uids;
    std::vector<void*> pointers;
    for (const auto& [uid, ptr] : memory) {
      uids.push_back(uid);
      pointers.push_back(ptr);
    }
    for (auto& [uid, value] : constants_) {
      uids.push_back(uid);
      pointers.push_back(&value);
    }
    Descriptor pack(lib_, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
             static_cast<int64_t>(uids.size()), uids.data());
    pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
             static_cast<int64_t>(pointers.size()), pointers.data());
    pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace);
    pack.finalize();
    lib_.check(lib_.execute(handle, plan_.at(0).get(), pack.get()), "cudnnBackendExecute");
  }

 private:
  void tensor(int64_t uid, Dims dims, Dims strides, cudnnDataType_t type, bool is_virtual,
              bool by_value) {
    Descriptor t(lib_, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t alignment = 16;
    t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
    t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
    t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
    t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    t.finalize();
    dims_[uid] = dims;
    tensors_.emplace(uid, std::move(t));
  }
  const Descriptor& tensor_of(int64_t uid) const { return tensors_.at(uid); }
  void add_operation(Descriptor op) {
    op.finalize();
    operations_.push_back(op.get());
    keep_.push_back(std::move(op));
  }

  const CudnnLibrary& lib_;
  int64_t next_uid_ = kFirstInternal;
  std::map<int64_t, Descriptor> tensors_;
  std::map<int64_t, Dims> dims_;
  std::vector<cudnnBackendDescriptor_t> operations_;  // in the order they were added
  std::vector<Descriptor> keep_;                      // operations and their descriptors
  std::vector<std::pair<int64_t, float>> constants_;
  std::vector<Descriptor> plan_;  // the one plan, once built
  int64_t workspace_ = 0;
};

cudnnDataType_t cudnn_type(DType dtype) {
  KILN_CHECK(dtype == DType::BF16 || dtype == DType::F16,
             std::string("cuDNN attention: bf16 or fp16 expected, got ") + dtype_name(dtype));
  return dtype == DType::BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
}

// cuDNN sees every tensor as [B, H, T, D]; these are the strides of kiln's layouts.
// The heads of qkv [B, T, (H + 2 Hkv) D] (and of dqkv).
Dims qkv_strides(const HeadLayout& L) {
  const int64_t W = L.qkv_width();
  return {L.seq * W, L.head_dim, W, 1};
}
// The heads of out and dout [B, T, H D].
Dims out_strides(const HeadLayout& L) {
  const int64_t C = L.n_head * L.head_dim;
  return {L.seq * C, L.head_dim, C, 1};
}
// A transpose of the last two dims: K^T and V^T as [B, Hkv, D, T] views of the same memory.
Dims transposed(const Dims& d) { return {d[0], d[1], d[3], d[2]}; }

// lse [B, H, T] is cuDNN's Stats [B, H, T, 1] as it lays them out.
Dims stats_dims(const HeadLayout& L) { return {L.batch, L.n_head, L.seq, 1}; }

float softmax_scale(const HeadLayout& L) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(L.head_dim)));
}

// The graphs, before any plan: what is computed, for Graph::build to plan.
std::unique_ptr<Graph> forward_graph(const CudnnLibrary& lib, const HeadLayout& L,
                                     cudnnDataType_t io) {
  const int64_t B = L.batch, H = L.n_head, Hkv = L.n_kv_head, T = L.seq, D = L.head_dim;
  auto g = std::make_unique<Graph>(lib);
  g->bind(kQ, {B, H, T, D}, qkv_strides(L), io);
  g->bind(kK, {B, Hkv, D, T}, transposed(qkv_strides(L)), io);
  g->bind(kV, {B, Hkv, T, D}, qkv_strides(L), io);
  g->bind(kO, {B, H, T, D}, out_strides(L), io);
  g->bind(kStats, stats_dims(L), contiguous(stats_dims(L)), CUDNN_DATA_FLOAT);
  const int64_t scale = g->constant(softmax_scale(L));

  const int64_t scores = g->pointwise(CUDNN_POINTWISE_MUL, {g->matmul(kQ, kK), scale});
  const int64_t masked = g->causal_mask(scores);
  const int64_t row_max = g->reduce(CUDNN_REDUCE_TENSOR_MAX, masked);
  const int64_t exps =
      g->pointwise(CUDNN_POINTWISE_EXP, {g->pointwise(CUDNN_POINTWISE_SUB, {masked, row_max})});
  const int64_t row_sum = g->reduce(CUDNN_REDUCE_TENSOR_ADD, exps);
  g->pointwise(CUDNN_POINTWISE_ADD, {row_max, g->pointwise(CUDNN_POINTWISE_LOG, {row_sum})},
               kStats);
  // The probabilities enter the second product in the input dtype, as the engines expect.
  const int64_t probs =
      g->pointwise(CUDNN_POINTWISE_DIV, {exps, row_sum}, g->temp({B, H, T, T}, io));
  g->matmul(probs, kV, kO);
  return g;
}

// y = a b summed over each group of query heads into `y`'s key/value heads: the product into
// a full-heads intermediate, then a reduction (grouped-query heads only).
void matmul_over_groups(Graph& g, const HeadLayout& L, cudnnDataType_t io, int64_t a, int64_t b,
                        int64_t y) {
  if (L.n_head == L.n_kv_head) {
    g.matmul(a, b, y);
    return;
  }
  const int64_t full = g.temp({L.batch, L.n_head, L.seq, L.head_dim}, io);
  g.reduce(CUDNN_REDUCE_TENSOR_ADD, g.matmul(a, b, full), y);
}

std::unique_ptr<Graph> backward_graph(const CudnnLibrary& lib, const HeadLayout& L,
                                      cudnnDataType_t io) {
  const int64_t B = L.batch, H = L.n_head, Hkv = L.n_kv_head, T = L.seq, D = L.head_dim;
  const Dims per_query{B, H, T, D}, per_key{B, Hkv, T, D};
  auto g = std::make_unique<Graph>(lib);
  g->bind(kQ, per_query, qkv_strides(L), io);
  g->bind(kK, transposed(per_key), transposed(qkv_strides(L)), io);
  g->bind(kV, transposed(per_key), transposed(qkv_strides(L)), io);
  g->bind(kO, per_query, out_strides(L), io);
  g->bind(kDO, per_query, out_strides(L), io);
  g->bind(kStats, stats_dims(L), contiguous(stats_dims(L)), CUDNN_DATA_FLOAT);
  g->bind(kDQ, per_query, qkv_strides(L), io);
  g->bind(kDK, per_key, qkv_strides(L), io);
  g->bind(kDV, per_key, qkv_strides(L), io);
  g->bind(kSoftmaxSum, stats_dims(L), contiguous(stats_dims(L)), CUDNN_DATA_FLOAT);
  g->bind(kDQAccum, per_query, contiguous(per_query), CUDNN_DATA_FLOAT);
  const int64_t scale = g->constant(softmax_scale(L));
  const Dims scores_t{B, H, T, T}, scores_t_strides{H * T * T, T * T, 1, T};  // S^T views

  // Each query's rowsum(dO * O) (the frontend scales it by a dropout factor, here 1).
  const int64_t dot =
      g->reduce(CUDNN_REDUCE_TENSOR_ADD, g->pointwise(CUDNN_POINTWISE_MUL, {kDO, kO}));
  g->pointwise(CUDNN_POINTWISE_MUL, {dot, g->constant(1.0f)}, kSoftmaxSum);

  // The probabilities again, from the forward's statistics.
  int64_t scores = g->pointwise(CUDNN_POINTWISE_MUL, {g->matmul(kQ, kK), scale});
  scores = g->pointwise(CUDNN_POINTWISE_SUB, {scores, kStats});
  const int64_t probs = g->pointwise(CUDNN_POINTWISE_EXP, {g->causal_mask(scores)});

  // dV = P^T dO.
  matmul_over_groups(*g, L, io, g->reshape(probs, scores_t, scores_t_strides, io), kDO, kDV);

  // dS = P * (dO V^T - rowsum(dO * O)) * scale.
  int64_t dscores = g->pointwise(CUDNN_POINTWISE_SUB, {g->matmul(kDO, kV), kSoftmaxSum});
  dscores = g->pointwise(CUDNN_POINTWISE_MUL, {dscores, probs});
  dscores = g->pointwise(CUDNN_POINTWISE_MUL, {dscores, scale});

  // dK = dS^T Q.
  matmul_over_groups(*g, L, io, g->reshape(dscores, scores_t, scores_t_strides, io), kQ, kDK);

  // dQ = dS K, with K the untransposed view of the same memory, accumulated in float.
  const int64_t keys = g->reshape(kK, per_key, qkv_strides(L), CUDNN_DATA_FLOAT);
  g->matmul(dscores, keys, kDQAccum);
  g->pointwise(CUDNN_POINTWISE_IDENTITY, {kDQAccum}, kDQ);
  return g;
}

// The plans of one shape, or why cuDNN refused it.
struct Plans {
  HeadLayout layout;
  DType dtype;
  std::unique_ptr<Graph> forward, backward;
  std::string error;
  // Backward's workspace: cuDNN's, then softmax_sum, then the dQ accumulator.
  size_t softmax_sum_offset = 0, dq_accum_offset = 0, backward_bytes = 0;
  size_t workspace() const { return std::max(forward->workspace(), backward_bytes); }
};

bool same(const HeadLayout& a, const HeadLayout& b) {
  return a.batch == b.batch && a.seq == b.seq && a.n_head == b.n_head &&
         a.n_kv_head == b.n_kv_head && a.head_dim == b.head_dim;
}

class CudnnAttentionImpl final : public CudnnAttention {
 public:
  CudnnAttentionImpl(std::unique_ptr<CudnnLibrary> lib, cudaStream_t stream)
      : lib_(std::move(lib)), stream_(stream) {
    lib_->check(lib_->create(&handle_), "cudnnCreate");
    lib_->check(lib_->set_stream(handle_, stream), "cudnnSetStream");
  }
  ~CudnnAttentionImpl() override {
    cache_.clear();  // their descriptors before the handle
    lib_->destroy(handle_);
  }

  int version() const override { return lib_->version(); }

  std::optional<size_t> prepare(const HeadLayout& layout, DType dtype, std::string& why) override {
    const Plans& plans = find(layout, dtype);
    if (!plans.error.empty()) {
      why = plans.error;
      return std::nullopt;
    }
    return plans.workspace();
  }

  void forward(void* out, float* lse, const void* qkv, const HeadLayout& L, DType dtype,
               void* workspace) override {
    Plans& plans = prepared(L, dtype);
    const auto* q = static_cast<const char*>(qkv);
    const size_t element = dtype_size(dtype);
    plans.forward->execute(handle_,
                           {{kQ, const_cast<char*>(q)},
                            {kK, const_cast<char*>(q + L.n_head * L.head_dim * element)},
                            {kV, const_cast<char*>(q + (L.n_head + L.n_kv_head) * L.head_dim * element)},
                            {kO, out},
                            {kStats, lse}},
                           workspace);
  }

  void backward(void* dqkv, const void* dout, const void* qkv, const void* out, const float* lse,
                const HeadLayout& L, DType dtype, void* workspace) override {
    Plans& plans = prepared(L, dtype);
    const auto* q = static_cast<const char*>(qkv);
    auto* dq = static_cast<char*>(dqkv);
    const size_t element = dtype_size(dtype);
    const size_t k_offset = L.n_head * L.head_dim * element;
    const size_t v_offset = (L.n_head + L.n_kv_head) * L.head_dim * element;
    char* base = static_cast<char*>(workspace);
    // Before cuDNN 9.6 the engines add into the dQ accumulator without clearing it first
    // (the frontend clears it for them then).
    if (lib_->version() < 90600)
      KILN_CUDA_CHECK(cudaMemsetAsync(base + plans.dq_accum_offset, 0,
                                      plans.backward_bytes - plans.dq_accum_offset, stream_));
    plans.backward->execute(handle_,
                            {{kQ, const_cast<char*>(q)},
                             {kK, const_cast<char*>(q + k_offset)},
                             {kV, const_cast<char*>(q + v_offset)},
                             {kO, const_cast<void*>(out)},
                             {kDO, const_cast<void*>(dout)},
                             {kStats, const_cast<float*>(lse)},
                             {kDQ, dq},
                             {kDK, dq + k_offset},
                             {kDV, dq + v_offset},
                             {kSoftmaxSum, base + plans.softmax_sum_offset},
                             {kDQAccum, base + plans.dq_accum_offset}},
                            workspace);
  }

 private:
  // The plans of a shape, built on first sight; the oldest shape leaves a full cache.
  Plans& find(const HeadLayout& L, DType dtype) {
    for (Plans& p : cache_)
      if (same(p.layout, L) && p.dtype == dtype) return p;
    if (cache_.size() == kCachedShapes) cache_.pop_front();
    Plans& p = cache_.emplace_back(Plans{L, dtype, nullptr, nullptr, {}, 0, 0, 0});
    try {
      p.forward = forward_graph(*lib_, L, cudnn_type(dtype));
      p.forward->build(handle_);
      p.backward = backward_graph(*lib_, L, cudnn_type(dtype));
      p.backward->build(handle_);
      const size_t stats_bytes = static_cast<size_t>(L.batch * L.n_head * L.seq) * sizeof(float);
      p.softmax_sum_offset = aligned(p.backward->workspace());
      p.dq_accum_offset = p.softmax_sum_offset + aligned(stats_bytes);
      p.backward_bytes = p.dq_accum_offset + stats_bytes * static_cast<size_t>(L.head_dim);
    } catch (const Error& e) {
      p.forward.reset();
      p.backward.reset();
      p.error = e.what();
    }
    return p;
  }
  Plans& prepared(const HeadLayout& L, DType dtype) {
    Plans& p = find(L, dtype);
    KILN_CHECK(p.error.empty(), "cuDNN attention: " + p.error);
    return p;
  }

  std::unique_ptr<CudnnLibrary> lib_;
  cudaStream_t stream_;
  cudnnHandle_t handle_ = nullptr;
  std::deque<Plans> cache_;
};

}  // namespace

std::unique_ptr<CudnnAttention> CudnnAttention::open(cudaStream_t stream, std::string& why) {
  std::unique_ptr<CudnnLibrary> lib = CudnnLibrary::load(why);
  if (!lib) return nullptr;
  try {
    return std::make_unique<CudnnAttentionImpl>(std::move(lib), stream);
  } catch (const Error& e) {
    why = e.what();
    return nullptr;
  }
}

}  // namespace kiln::cuda
