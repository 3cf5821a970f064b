// KILN_HOST_DEVICE: a function that compiles for both the host and the device under nvcc (and
// for the host alone elsewhere), for the formulas the CPU and CUDA backends must share bit for
// bit (kernels/counter_random.h, kernels/fp8_scale.h, kernels/optimizer_scalars.h).
#pragma once

#ifdef __CUDACC__
#define KILN_HOST_DEVICE __host__ __device__
#else
#define KILN_HOST_DEVICE
#endif
