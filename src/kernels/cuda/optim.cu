// CUDA kernels of the optim family (ops/optim_kernel.h): fused SGD and Adam/AdamW steps over a whole
// list of parameters, a few launches in all (multi_tensor_apply.cuh), one pass over each tensor.
//
// Results: float32 and float64 bit for bit the CPU kernels' (Note [Optimizer rounding],
// optim_math.cuh); float16 and bfloat16 parameters (and their states) are updated in float and rounded
// once on store. The list may mix dtypes: it is split by dtype, one launch series per dtype.
// Everything is checked on the host before the first launch, so a bad entry changes nothing.
//
// Kernel layout: each block owns one chunk of one tensor; each thread loads kMtaIlp elements of every
// operand (coalesced: element base + k * blockDim.x + threadIdx.x), updates them in registers, stores.
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/multi_tensor_apply.cuh"
#include "kernels/cuda/optim_math.cuh"
#include "ops/optim_kernel.h"
#include "tessera/error.h"

namespace tessera::cuda {
namespace {

using namespace optim_math;

// ---- SGD ------------------------------------------------------------------------------------------
// ptrs: 0 param, 1 grad, 2 momentum buffer (with momentum); flag: the buffer is fresh.
template <bool kMomentum>
using SgdArgs = MtaArgs<kMomentum ? 3 : 2, 1>;

template <class T, bool kMomentum>
static __global__ void __launch_bounds__(kMtaThreads)
    sgd_mta_kernel(const __grid_constant__ SgdArgs<kMomentum> args, const SgdScalars<dacc_t<T>> s) {
  using C = dacc_t<T>;
  const MtaChunk ch = mta_chunk(args);
  T* p = static_cast<T*>(args.ptrs[0][ch.slot]) + ch.start;
  const T* g = static_cast<const T*>(args.ptrs[1][ch.slot]) + ch.start;
  T* b = nullptr;
  if constexpr (kMomentum) b = static_cast<T*>(args.ptrs[2][ch.slot]) + ch.start;
  const bool fresh = args.flag[ch.slot] != 0;
  for (int base = 0; base < ch.len; base += kMtaIlp * blockDim.x) {
    C pr[kMtaIlp], gr[kMtaIlp], br[kMtaIlp];
#pragma unroll
    for (int k = 0; k < kMtaIlp; ++k) {
      const int i = base + k * blockDim.x + threadIdx.x;
      pr[k] = gr[k] = br[k] = C(0);
      if (i < ch.len) {
        pr[k] = mta_load(p, i);
        gr[k] = mta_load(g, i);
        if (kMomentum && !fresh) br[k] = mta_load(b, i);
      }
    }
#pragma unroll
    for (int k = 0; k < kMtaIlp; ++k) sgd_element<C, kMomentum>(pr[k], gr[k], br[k], fresh, s);
#pragma unroll
    for (int k = 0; k < kMtaIlp; ++k) {
      const int i = base + k * blockDim.x + threadIdx.x;
      if (i < ch.len) {
        mta_store(p, i, pr[k]);
        if constexpr (kMomentum) mta_store(b, i, br[k]);
      }
    }
  }
}

template <class T, bool kMomentum>
void launch_sgd(const std::vector<MtaTensor<kMomentum ? 3 : 2, 1>>& tensors, const SGDKernelParams& o,
                cudaStream_t stream) {
  using C = dacc_t<T>;
  const SgdScalars<C> s{static_cast<C>(o.weight_decay), static_cast<C>(o.momentum), static_cast<C>(1 - o.dampening),
                        static_cast<C>(-o.lr),           o.weight_decay != 0,        o.maximize,
                        o.nesterov};
  multi_tensor_apply(tensors, [&](const SgdArgs<kMomentum>& args, int blocks) {
    sgd_mta_kernel<T, kMomentum><<<blocks, kMtaThreads, 0, stream>>>(args, s);
    check_launch("sgd", "sgd_mta_kernel");
  });
}

// ---- Adam / AdamW ---------------------------------------------------------------------------------------
// ptrs: 0 param, 1 grad, 2 exp_avg, 3 exp_avg_sq, 4 max_exp_avg_sq (amsgrad);
// scalars: 0 -lr / bias_correction1, 1 sqrt(bias_correction2), in float64 (rounded to C in the kernel).
template <bool kAmsgrad>
using AdamArgs = MtaArgs<kAmsgrad ? 5 : 4, 2>;

template <class T, bool kAmsgrad>
static __global__ void __launch_bounds__(kMtaThreads)
    adam_mta_kernel(const __grid_constant__ AdamArgs<kAmsgrad> args, const AdamScalars<dacc_t<T>> s) {
  using C = dacc_t<T>;
  const MtaChunk ch = mta_chunk(args);
  T* p = static_cast<T*>(args.ptrs[0][ch.slot]) + ch.start;
  const T* g = static_cast<const T*>(args.ptrs[1][ch.slot]) + ch.start;
  T* m = static_cast<T*>(args.ptrs[2][ch.slot]) + ch.start;
  T* v = static_cast<T*>(args.ptrs[3][ch.slot]) + ch.start;
  T* vmax = nullptr;
  if constexpr (kAmsgrad) vmax = static_cast<T*>(args.ptrs[4][ch.slot]) + ch.start;
  const C neg_step_size = static_cast<C>(args.scalars[0][ch.slot]);
  const C bc2_sqrt = static_cast<C>(args.scalars[1][ch.slot]);
  for (int base = 0; base < ch.len; base += kMtaIlp * blockDim.x) {
    C pr[kMtaIlp], gr[kMtaIlp], mr[kMtaIlp], vr[kMtaIlp], xr[kMtaIlp];
#pragma unroll
    for (int k = 0; k < kMtaIlp; ++k) {
      const int i = base + k * blockDim.x + threadIdx.x;
      pr[k] = gr[k] = mr[k] = vr[k] = xr[k] = C(0);
      if (i < ch.len) {
        pr[k] = mta_load(p, i);
        gr[k] = mta_load(g, i);
        mr[k] = mta_load(m, i);
        vr[k] = mta_load(v, i);
        if constexpr (kAmsgrad) xr[k] = mta_load(vmax, i);
      }
    }
#pragma unroll
    for (int k = 0; k < kMtaIlp; ++k)
      adam_element<C, kAmsgrad>(pr[k], gr[k], mr[k], vr[k], xr[k], neg_step_size, bc2_sqrt, s);
#pragma unroll
    for (int k = 0; k < kMtaIlp; ++k) {
      const int i = base + k * blockDim.x + threadIdx.x;
      if (i < ch.len) {
        mta_store(p, i, pr[k]);
        mta_store(m, i, mr[k]);
        mta_store(v, i, vr[k]);
        if constexpr (kAmsgrad) mta_store(vmax, i, xr[k]);
      }
    }
  }
}

template <class T, bool kAmsgrad>
void launch_adam(const std::vector<MtaTensor<kAmsgrad ? 5 : 4, 2>>& tensors, const AdamKernelParams& o,
                 cudaStream_t stream) {
  using C = dacc_t<T>;
  const bool decoupled = o.decoupled_weight_decay;
  const AdamScalars<C> s{static_cast<C>(o.beta1),
                         static_cast<C>(1 - o.beta1),
                         static_cast<C>(o.beta2),
                         static_cast<C>(1 - o.beta2),
                         static_cast<C>(o.eps),
                         static_cast<C>(o.weight_decay),
                         static_cast<C>(1 - o.lr * o.weight_decay),
                         !decoupled && o.weight_decay != 0,
                         decoupled,
                         o.maximize};
  multi_tensor_apply(tensors, [&](const AdamArgs<kAmsgrad>& args, int blocks) {
    adam_mta_kernel<T, kAmsgrad><<<blocks, kMtaThreads, 0, stream>>>(args, s);
    check_launch("adam", "adam_mta_kernel");
  });
}

// ---- host-side checks (the CPU kernels' messages) ----------------------------------------------------------
void check_entry(const char* op, const Tensor& param, const Tensor& other, const char* what) {
  TS_CHECK(other.dtype() == param.dtype() && other.sizes() == param.sizes() && other.is_contiguous(), ValueError,
           op, " kernel: ", what, " must be a contiguous tensor of the parameter's dtype (", dtype_name(param.dtype()),
           ") and sizes ", param.sizes(), ", got dtype ", dtype_name(other.dtype()), " and sizes ", other.sizes());
  TS_CHECK(other.device() == param.device(), DeviceError, op, " kernel: ", what, " is on ", other.device().str(),
           " but the parameter is on ", param.device().str());
}

void check_param(const char* op, const Tensor& p, const Device& device) {
  TS_CHECK(p.is_contiguous(), ValueError, op, " kernel: the parameter must be contiguous");
  TS_CHECK(p.device() == device, DeviceError, op, " kernel: expected every parameter on ", device.str(), ", got one on ",
           p.device().str());
  TS_CHECK(is_floating_point(p.dtype()), DTypeError, op,
           " kernel: expected float16, bfloat16, float32 or float64 parameters, got ", dtype_name(p.dtype()));
}

// Calls f(TypeTag<device type>, indices of the entries of that dtype) for each dtype present.
template <class F>
void for_each_dtype_group(const TensorList& params, F&& f) {
  for (DType d : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    std::vector<size_t> idx;
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i].dtype() == d) idx.push_back(i);
    if (idx.empty()) continue;
    dispatch_device_dtype<DTypeSet::Floating>(d, "optimizer", [&]<class T>(TypeTag<T> tag) { f(tag, idx); });
  }
}

// ---- tensor-level entries ------------------------------------------------------------------------------------
void sgd_cuda(const TensorList& params, const TensorList& grads, const TensorList& buffers,
              const std::vector<uint8_t>& new_buffer, const SGDKernelParams& o) {
  const bool momentum = o.momentum != 0;
  TS_CHECK(grads.size() == params.size() && (!momentum || (buffers.size() == params.size() &&
                                                           new_buffer.size() == params.size())),
           ValueError, "sgd kernel: expected one gradient", momentum ? " and one momentum buffer" : "",
           " per parameter (", params.size(), " parameters)");
  if (params.empty()) return;
  const Device device = params[0].device();
  for (size_t i = 0; i < params.size(); ++i) {
    check_param("sgd", params[i], device);
    check_entry("sgd", params[i], grads[i], "the gradient");
    if (momentum) check_entry("sgd", params[i], buffers[i], "the momentum buffer");
  }
  CurrentDevice guard(device.index());
  cudaStream_t stream = stream_of(params[0]);
  for_each_dtype_group(params, [&]<class T>(TypeTag<T>, const std::vector<size_t>& idx) {
    if (momentum) {
      std::vector<MtaTensor<3, 1>> list;
      for (size_t i : idx)
        list.push_back({{params[i].data_ptr(), grads[i].data_ptr(), buffers[i].data_ptr()},
                        params[i].numel(),
                        {0.0},
                        static_cast<uint8_t>(new_buffer[i] != 0)});
      launch_sgd<T, true>(list, o, stream);
    } else {
      std::vector<MtaTensor<2, 1>> list;
      for (size_t i : idx) list.push_back({{params[i].data_ptr(), grads[i].data_ptr()}, params[i].numel(), {0.0}, 0});
      launch_sgd<T, false>(list, o, stream);
    }
  });
}

void adam_cuda(const TensorList& params, const TensorList& grads, const TensorList& exp_avgs,
               const TensorList& exp_avg_sqs, const TensorList& max_exp_avg_sqs, const std::vector<int64_t>& steps,
               const AdamKernelParams& o) {
  const size_t n = params.size();
  TS_CHECK(grads.size() == n && exp_avgs.size() == n && exp_avg_sqs.size() == n && steps.size() == n &&
               (!o.amsgrad || max_exp_avg_sqs.size() == n),
           ValueError, "adam kernel: expected one gradient, exp_avg, exp_avg_sq",
           o.amsgrad ? ", max_exp_avg_sq" : "", " and step per parameter (", n, " parameters)");
  if (n == 0) return;
  const Device device = params[0].device();
  for (size_t i = 0; i < n; ++i) {
    check_param("adam", params[i], device);
    TS_CHECK(steps[i] >= 1, ValueError, "adam kernel: expected a step count >= 1, got ", steps[i]);
    check_entry("adam", params[i], grads[i], "the gradient");
    check_entry("adam", params[i], exp_avgs[i], "exp_avg");
    check_entry("adam", params[i], exp_avg_sqs[i], "exp_avg_sq");
    if (o.amsgrad) check_entry("adam", params[i], max_exp_avg_sqs[i], "max_exp_avg_sq");
  }
  CurrentDevice guard(device.index());
  cudaStream_t stream = stream_of(params[0]);
  for_each_dtype_group(params, [&]<class T>(TypeTag<T>, const std::vector<size_t>& idx) {
    auto entry = [&]<int Depth>(size_t i) {
      const AdamStepScalars st = adam_step_scalars(o.lr, o.beta1, o.beta2, steps[i]);
      MtaTensor<Depth, 2> t{{params[i].data_ptr(), grads[i].data_ptr(), exp_avgs[i].data_ptr(),
                             exp_avg_sqs[i].data_ptr()},
                            params[i].numel(),
                            {st.neg_step_size, st.bias_correction2_sqrt},
                            0};
      if constexpr (Depth == 5) t.ptrs[4] = max_exp_avg_sqs[i].data_ptr();
      return t;
    };
    if (o.amsgrad) {
      std::vector<MtaTensor<5, 2>> list;
      for (size_t i : idx) list.push_back(entry.template operator()<5>(i));
      launch_adam<T, true>(list, o, stream);
    } else {
      std::vector<MtaTensor<4, 2>> list;
      for (size_t i : idx) list.push_back(entry.template operator()<4>(i));
      launch_adam<T, false>(list, o, stream);
    }
  });
}

}  // namespace

void register_optim() {
  sgd_kernel.set(DeviceType::CUDA, &sgd_cuda);
  adam_kernel.set(DeviceType::CUDA, &adam_cuda);
}

}  // namespace tessera::cuda
