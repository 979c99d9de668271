// CUDA kernels of the amp family (ops/amp_kernel.h): the gradient scaler's fused inf/NaN check and
// unscale over every gradient of a device, and the scale update, both without a host sync.
//
// Unscale: multi-tensor apply (multi_tensor_apply.cuh), one pointer per tensor; the tensor's dtype
// rides in the per-tensor flag, so one launch series covers a list that mixes float32, float64,
// float16 and bfloat16 gradients (a block works on one chunk of one tensor, so the dtype branch is
// uniform per block). Each thread loads kMtaIlp elements (coalesced: base + k * blockDim.x + tid),
// checks them in the accumulation type (float; double for float64), multiplies by inv_scale unless
// it is exactly 1, rounds once on store. A thread that saw a non-finite value writes 1.0f to
// found_inf (every writer writes the same value, so the race is benign; the flag is never cleared).
// inv_scale and found_inf are read and written through device pointers: the host never waits.
//
// Update: one thread (the state is two scalars), the CPU kernel's arithmetic: scale * factor in
// double, rounded to float; growth kept only if finite.
#include <cstdint>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/multi_tensor_apply.cuh"
#include "ops/amp_kernel.h"
#include "tessera/error.h"

namespace tessera::cuda {
namespace {

// The per-tensor flag: which element type the pointer has.

using UnscaleArgs = MtaArgs<1, 1>;  // ptrs: 0 grad; the one scalar slot is unused

// One chunk (len elements from g) of one tensor; returns whether this thread saw inf or NaN.
template <class T>
__device__ __forceinline__ bool unscale_chunk(T* g, int len, float inv_scale) {
  using C = dacc_t<T>;
  const C inv = static_cast<C>(inv_scale);
  const bool scale = inv_scale != 1.0f;
  bool bad = false;
  for (int base = 0; base < len; base += kMtaIlp * blockDim.x) {
    C v[kMtaIlp];
    mta_load_ilp(g, base, len, v);
#pragma unroll
    for (int k = 0; k < kMtaIlp; ++k) bad |= !isfinite(v[k]);
    if (scale) {
#pragma unroll
      for (int k = 0; k < kMtaIlp; ++k) {
        const int i = base + k * blockDim.x + threadIdx.x;
        if (i < len) mta_store(g, i, v[k] * inv);
      }
    }
  }
  return bad;
}

static __global__ void __launch_bounds__(kMtaThreads)
    unscale_mta_kernel(const __grid_constant__ UnscaleArgs args, float* found_inf, const float* inv_scale_ptr) {
  const MtaChunk ch = mta_chunk(args);
  const float inv_scale = *inv_scale_ptr;
  void* base = args.ptrs[0][ch.slot];
  bool bad = false;
  switch (args.flag[ch.slot]) {
    case kMtaF32: bad = unscale_chunk(static_cast<float*>(base) + ch.start, ch.len, inv_scale); break;
    case kMtaF64: bad = unscale_chunk(static_cast<double*>(base) + ch.start, ch.len, inv_scale); break;
    case kMtaF16: bad = unscale_chunk(static_cast<__half*>(base) + ch.start, ch.len, inv_scale); break;
    default: bad = unscale_chunk(static_cast<__nv_bfloat16*>(base) + ch.start, ch.len, inv_scale); break;
  }
  if (bad) *found_inf = 1.0f;
}

static __global__ void update_scale_kernel(float* scale, int32_t* growth_tracker, const float* found_inf,
                                           double growth_factor, double backoff_factor, int64_t growth_interval) {
  if (*found_inf != 0.0f) {
    *scale = static_cast<float>(static_cast<double>(*scale) * backoff_factor);
    *growth_tracker = 0;
    return;
  }
  const int64_t successful = static_cast<int64_t>(*growth_tracker) + 1;
  if (successful == growth_interval) {
    const float grown = static_cast<float>(static_cast<double>(*scale) * growth_factor);
    if (isfinite(grown)) *scale = grown;
    *growth_tracker = 0;
  } else {
    *growth_tracker = static_cast<int32_t>(successful);
  }
}

// ---- launchers ----------------------------------------------------------------------------------------
void launch_unscale(const std::vector<MtaTensor<1, 1>>& tensors, float* found_inf, const float* inv_scale,
                    cudaStream_t stream) {
  multi_tensor_apply(tensors, [&](const UnscaleArgs& args, int blocks) {
    unscale_mta_kernel<<<blocks, kMtaThreads, 0, stream>>>(args, found_inf, inv_scale);
    check_launch("_amp_foreach_non_finite_check_and_unscale_", "unscale_mta_kernel");
  });
}

void launch_update_scale(float* scale, int32_t* growth_tracker, const float* found_inf, double growth_factor,
                         double backoff_factor, int64_t growth_interval, cudaStream_t stream) {
  update_scale_kernel<<<1, 1, 0, stream>>>(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                                           growth_interval);
  check_launch("_amp_update_scale_", "update_scale_kernel");
}

// ---- tensor-level entries -----------------------------------------------------------------------------
void unscale_cuda(const TensorList& grads, const Tensor& found_inf, const Tensor& inv_scale) {
  std::vector<MtaTensor<1, 1>> list;
  list.reserve(grads.size());
  for (const Tensor& g : grads) {
    TS_CHECK(g.is_contiguous(), ValueError, "_amp_foreach_non_finite_check_and_unscale_ kernel: expected contiguous "
             "gradients");
    const uint8_t flag = mta_float_flag(g.dtype(), "_amp_foreach_non_finite_check_and_unscale_");
    if (g.numel() == 0) continue;
    list.push_back({{g.data_ptr()}, g.numel(), {0.0}, flag});
  }
  if (list.empty()) return;
  CurrentDevice guard(found_inf.device().index());
  launch_unscale(list, static_cast<float*>(found_inf.data_ptr()), static_cast<const float*>(inv_scale.data_ptr()),
                 stream_of(found_inf));
}

void update_scale_cuda(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                       double growth_factor, double backoff_factor, int64_t growth_interval) {
  CurrentDevice guard(scale.device().index());
  launch_update_scale(static_cast<float*>(scale.data_ptr()), static_cast<int32_t*>(growth_tracker.data_ptr()),
                      static_cast<const float*>(found_inf.data_ptr()), growth_factor, backoff_factor,
                      growth_interval, stream_of(scale));
}

}  // namespace

void register_amp() {
  amp_unscale_kernel.set(DeviceType::CUDA, &unscale_cuda);
  amp_update_scale_kernel.set(DeviceType::CUDA, &update_scale_cuda);
}

}  // namespace tessera::cuda
