#include "kernels/cuda/fused_matmul.h"

#include <string>

#include "base/check.h"
#include "kernels/cuda/kernels.cuh"

namespace kiln::cuda {
namespace {

cudaDataType lt_type(const Tensor& t, const char* op) {
  switch (t.dtype) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    default: break;
  }
  fail(std::string(op) + ": fp32, bf16 or fp16 tensors expected, got " + dtype_name(t.dtype));
}

// out[N, out] = x[N, in] weight[out, in]^T, then the epilogue.
bool forward(Matmul& matmul, const Tensor& out, const Tensor& x, const Tensor& weight,
             const EpilogueArgs& epilogue, cudaStream_t stream, const char* op) {
  const int64_t rows = x.shape.rows(), in = x.shape.cols(), width = weight.shape.rows();
  return matmul.run(lt_type(x, op), lt_type(out, op), false, true, rows, width, in, x.data, in,
                    weight.data, in, out.data, width, false, stream, epilogue);
}

}  // namespace

bool fused_matmul_bias(Matmul& matmul, const Tensor& out, const Tensor& x, const Tensor& weight,
                       const Tensor& bias, cudaStream_t stream) {
  EpilogueArgs epilogue;
  epilogue.kind = Epilogue::Bias;
  epilogue.bias = bias.data;
  return forward(matmul, out, x, weight, epilogue, stream, "matmul_bias");
}

bool fused_matmul_bias_gelu(Matmul& matmul, const Tensor& out, const Tensor& pre, const Tensor& x,
                            const Tensor& weight, const Tensor& bias, cudaStream_t stream) {
  EpilogueArgs epilogue;
  epilogue.kind = Epilogue::GeluAuxBias;
  epilogue.bias = bias.data;
  epilogue.aux = pre.data;
  epilogue.aux_ld = pre.shape.cols();
  return forward(matmul, out, x, weight, epilogue, stream, "matmul_bias_gelu");
}

bool fused_matmul_bias_grad(Matmul& matmul, const Tensor& dweight, const Tensor& dbias,
                            const Tensor& dy, const Tensor& x, cudaStream_t stream) {
  const int64_t rows = x.shape.rows(), in = x.shape.cols(), width = dy.shape.cols();
  float* summed = static_cast<float*>(matmul.bias_grad_buffer(static_cast<size_t>(width) * sizeof(float)));
  if (!summed) return false;
  EpilogueArgs epilogue;
  epilogue.kind = Epilogue::BiasGradA;
  epilogue.bias_grad = summed;
  // dweight[width, in] += dy^T x: cuBLASLt sums dy's rows (its B) over the product's k.
  if (!matmul.run(lt_type(x, "matmul_bias_grad"), CUDA_R_32F, true, false, width, in, rows,
                  dy.data, width, x.data, in, dweight.data, in, true, stream, epilogue))
    return false;
  add(static_cast<float*>(dbias.data), static_cast<const float*>(dbias.data), summed, width, stream);
  return true;
}

bool fused_matmul_dgelu(Matmul& matmul, const Tensor& dx, const Tensor& dy, const Tensor& weight,
                        const Tensor& pre, cudaStream_t stream) {
  const int64_t rows = dy.shape.rows(), width = dy.shape.cols(), in = dx.shape.cols();
  EpilogueArgs epilogue;
  epilogue.kind = Epilogue::DGelu;
  epilogue.aux = pre.data;
  epilogue.aux_ld = in;
  // dx[N, in] = dy[N, width] weight[width, in], then times gelu'(pre).
  return matmul.run(lt_type(dy, "matmul_dgelu"), lt_type(dx, "matmul_dgelu"), false, false, rows, in,
                    width, dy.data, width, weight.data, in, dx.data, in, false, stream, epilogue);
}

}  // namespace kiln::cuda
