// CUDA batch normalization behind ops/batch_norm_kernel.h through cuDNN 9's batch-norm API
// (cudnnBatchNormalizationForwardTrainingEx / ForwardInference / BackwardEx), with a fallback written
// in tessera ops for what cuDNN does not take.
//
// Shapes: x is seen as (N, C, L); cuDNN gets a 4-D descriptor (N, C, L, 1), NCHW for the contiguous
// layout and NHWC for channels-last (the same bytes either way), so 2-D (N, C), 3-D (N, C, L) and 5-D
// (N, C, D, H, W) inputs run as 4-D ones. Scale / bias / mean / variance descriptors come from
// cudnnDeriveBNTensorDescriptor: float for float16 / bfloat16 / float32 data, double for float64,
// which is the op's parameter dtype (ops/batch_norm_kernel.h).
//
// Modes: CUDNN_BATCHNORM_SPATIAL_PERSISTENT for training on channels-last float16 / bfloat16 (the fast
// NHWC kernels, as PyTorch picks them for channels-last input), CUDNN_BATCHNORM_SPATIAL otherwise and
// whenever cuDNN reports the persistent mode as not supported. The training forward's reserve space
// (cudnnGetBatchNormalizationTrainingExReserveSpaceSize) is returned to the op, which saves it for the
// backward of the same call; a backward whose reserve does not have the size its mode asks for runs
// the plain SPATIAL backward (cudnnBatchNormalizationBackward, no reserve). Saved statistics are mean
// and inverse standard deviation in every mode (cuDNN's "saved inverse variance" is 1/sqrt(var + eps)).
//
// Semantics checked against PyTorch's: cuDNN's exponentialAverageFactor is the momentum
// (running = (1 - factor) * running + factor * batch), and its running variance is updated with the
// unbiased batch variance, as PyTorch's cuDNN path relies on. Undefined running statistics are passed
// as null pointers (no update); undefined weight / bias as ones / zeros, since cuDNN needs both.
// cuDNN's epsilon must be >= CUDNN_BN_MIN_EPSILON: a smaller eps takes the fallback.
//
// Fallback (tessera ops on the device, float32 accumulation for 16-bit data): tensors of 2^31
// elements or more (cuDNN descriptors are 32-bit), channels-last float64, configurations cuDNN reports
// as not supported, and the evaluation-mode backward (cuDNN's backward always differentiates through batch
// statistics, which is the training formula).
#include <climits>
#include <limits>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cudnn_handle.h"
#include "ops/batch_norm_kernel.h"
#include "runtime/cuda/cuda_allocator.h"
#include "tensor/tensor_impl.h"
#include "tessera/functions.h"

namespace tessera::cuda {
namespace {

const char* const kOp = "native_batch_norm";

bool is_16bit(DType t) { return t == DType::Float16 || t == DType::BFloat16; }
DType param_dtype(DType x) { return is_16bit(x) ? DType::Float32 : x; }

// ---- fallback in tessera ops ---------------------------------------------------------------------
// The (1, C, 1, ...) shape that broadcasts a per-channel tensor against x, and the reduced dims.
Shape channel_view(const Tensor& x) {
  Shape v(static_cast<size_t>(x.dim()), 1);
  v[1] = x.size(1);
  return v;
}
std::vector<int64_t> reduce_dims(const Tensor& x) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// invstd * weight (weight 1 when undefined), (C).
Tensor scale_of(const Tensor& invstd, const Tensor& weight) { return weight.defined() ? invstd * weight : invstd; }

void fallback_forward_training(const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd, const Tensor& x,
                               const Tensor& weight, const Tensor& bias, const Tensor& rm, const Tensor& rv,
                               const BatchNormShape& s, double momentum, double eps) {
  const DType p = param_dtype(x.dtype());
  const Shape view = channel_view(x);
  const std::vector<int64_t> dims = reduce_dims(x);
  Tensor xp = x.to(p);
  Tensor mu = mean(xp, dims);                      // (C)
  Tensor d = xp - mu.reshape(view);
  Tensor var = mean(d * d, dims);                  // (C), biased
  Tensor invstd = rsqrt(var + eps);
  Tensor out = d * scale_of(invstd, weight).reshape(view);
  if (bias.defined()) out = out + bias.reshape(view);
  Tensor(y).copy_(out);
  Tensor(save_mean).copy_(mu);
  Tensor(save_invstd).copy_(invstd);
  if (rm.defined()) {
    const double m = static_cast<double>(s.n * s.l);
    Tensor unbiased = m > 1 ? var * (m / (m - 1)) : full({s.c}, std::numeric_limits<double>::quiet_NaN(),
                                                          TensorOptions(p, x.device()));
    Tensor(rm).mul_(1.0 - momentum).add_(mu, momentum);
    Tensor(rv).mul_(1.0 - momentum).add_(unbiased, momentum);
  }
}

void fallback_forward_inference(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias,
                                const Tensor& rm, const Tensor& rv, double eps) {
  const Shape view = channel_view(x);
  Tensor out = (x.to(param_dtype(x.dtype())) - rm.reshape(view)) * scale_of(rsqrt(rv + eps), weight).reshape(view);
  if (bias.defined()) out = out + bias.reshape(view);
  Tensor(y).copy_(out);
}

void fallback_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                       const Tensor& x, const Tensor& weight, const Tensor& mean_c, const Tensor& invstd,
                       const BatchNormShape& s, bool training) {
  const DType p = param_dtype(x.dtype());
  const Shape view = channel_view(x);
  const std::vector<int64_t> dims = reduce_dims(x);
  Tensor g = dy.to(p);
  Tensor xhat = (x.to(p) - mean_c.reshape(view)) * invstd.reshape(view);
  Tensor sum_g = sum(g, dims);              // (C)
  Tensor sum_gx = sum(g * xhat, dims);      // (C)
  if (dbias.defined()) Tensor(dbias).copy_(sum_g);
  if (dweight.defined()) Tensor(dweight).copy_(sum_gx);
  if (!dx.defined()) return;
  Tensor k = scale_of(invstd, weight).reshape(view);
  if (training) {
    const double m = static_cast<double>(s.n * s.l);
    Tensor(dx).copy_(k * (g - (sum_g / m).reshape(view) - xhat * (sum_gx / m).reshape(view)));
  } else {
    Tensor(dx).copy_(k * g);
  }
}

// ---- cuDNN ----------------------------------------------------------------------------------------
// cuDNN's descriptors hold 32-bit sizes and strides. float64 runs in NCHW only (cuDNN's NHWC kernels
// are for float16 / bfloat16 / float32, as for its convolutions): channels-last float64 takes the fallback.
bool cudnn_takes(const BatchNormShape& s, DType dt, double eps) {
  const int64_t total = s.n * s.c * s.l;
  return s.n <= INT_MAX && s.c <= INT_MAX && s.l <= INT_MAX && total < INT_MAX && eps >= CUDNN_BN_MIN_EPSILON &&
         !(s.channels_last && dt == DType::Float64);
}

cudnnBatchNormMode_t preferred_mode(const BatchNormShape& s, DType dt, bool training) {
  return training && s.channels_last && is_16bit(dt) ? CUDNN_BATCHNORM_SPATIAL_PERSISTENT : CUDNN_BATCHNORM_SPATIAL;
}

// The data descriptor (N, C, L, 1) in the shape's layout and the derived per-channel descriptor.
struct BnDescs {
  CudnnTensorDesc x, p;
  BnDescs(const BatchNormShape& s, DType dt, cudnnBatchNormMode_t mode) {
    TS_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x.get(), s.channels_last ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                              cudnn_dtype(dt, kOp), static_cast<int>(s.n), static_cast<int>(s.c),
                                              static_cast<int>(s.l), 1));
    TS_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(p.get(), x.get(), mode));
  }
};

// alpha = 1, beta = 0 in the type cuDNN reads for the data type (double for float64 data).
struct Blend {
  float f1 = 1.f, f0 = 0.f;
  double d1 = 1.0, d0 = 0.0;
  bool dbl;
  explicit Blend(DType dt) : dbl(dt == DType::Float64) {}
  const void* one() const { return dbl ? static_cast<const void*>(&d1) : static_cast<const void*>(&f1); }
  const void* zero() const { return dbl ? static_cast<const void*>(&d0) : static_cast<const void*>(&f0); }
};

void* ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

Tensor ones_or(const Tensor& t, int64_t c, DType p, Device dev) {
  return t.defined() ? t : ones({c}, TensorOptions(p, dev));
}
Tensor zeros_or(const Tensor& t, int64_t c, DType p, Device dev) {
  return t.defined() ? t : zeros({c}, TensorOptions(p, dev));
}

// One training forward in `mode`; returns the status of the cuDNN call (not-supported is the caller's
// to handle; anything else that fails raises).
cudnnStatus_t try_forward_training(cudnnBatchNormMode_t mode, const Tensor& y, const Tensor& save_mean,
                                   const Tensor& save_invstd, Tensor& reserve, const Tensor& x, const Tensor& w,
                                   const Tensor& b, const Tensor& rm, const Tensor& rv, const BatchNormShape& s,
                                   double momentum, double eps) {
  cudnnHandle_t h = cudnn_handle(stream_of(x));
  BnDescs d(s, x.dtype(), mode);
  size_t ws_bytes = 0, rs_bytes = 0;
  cudnnStatus_t st = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
      h, mode, CUDNN_BATCHNORM_OPS_BN, d.x.get(), d.x.get(), d.x.get(), d.p.get(), nullptr, &ws_bytes);
  if (cudnn_not_supported(st)) return st;
  TS_CUDNN_CHECK(st);
  st = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(h, mode, CUDNN_BATCHNORM_OPS_BN, nullptr, d.x.get(),
                                                            &rs_bytes);
  if (cudnn_not_supported(st)) return st;
  TS_CUDNN_CHECK(st);
  DataPtr ws = ws_bytes > 0 ? allocate_workspace(ws_bytes) : DataPtr();
  Tensor res = rs_bytes > 0 ? make_empty({static_cast<int64_t>(rs_bytes)}, DType::UInt8, x.device()) : Tensor();
  const Blend blend(x.dtype());
  st = cudnnBatchNormalizationForwardTrainingEx(
      h, mode, CUDNN_BATCHNORM_OPS_BN, blend.one(), blend.zero(), d.x.get(), x.data_ptr(), nullptr, nullptr,
      d.x.get(), y.data_ptr(), d.p.get(), w.data_ptr(), b.data_ptr(), momentum, ptr_or_null(rm), ptr_or_null(rv), eps,
      save_mean.data_ptr(), save_invstd.data_ptr(), nullptr, ws.get(), ws_bytes, ptr_or_null(res), rs_bytes);
  if (cudnn_not_supported(st)) return st;
  TS_CUDNN_CHECK(st);
  reserve = res;
  return st;
}

void forward_training_cuda(const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd, Tensor& reserve,
                           const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                           const Tensor& running_var, const BatchNormShape& s, double momentum, double eps) {
  CurrentDevice guard(x.device().index());
  if (cudnn_takes(s, x.dtype(), eps)) {
    const DType p = param_dtype(x.dtype());
    const Tensor w = ones_or(weight, s.c, p, x.device()), b = zeros_or(bias, s.c, p, x.device());
    const cudnnBatchNormMode_t first = preferred_mode(s, x.dtype(), true);
    cudnnStatus_t st = try_forward_training(first, y, save_mean, save_invstd, reserve, x, w, b, running_mean,
                                            running_var, s, momentum, eps);
    if (st == CUDNN_STATUS_SUCCESS) return;
    if (first != CUDNN_BATCHNORM_SPATIAL) {
      st = try_forward_training(CUDNN_BATCHNORM_SPATIAL, y, save_mean, save_invstd, reserve, x, w, b, running_mean,
                                running_var, s, momentum, eps);
      if (st == CUDNN_STATUS_SUCCESS) return;
    }
  }
  reserve = Tensor();
  fallback_forward_training(y, save_mean, save_invstd, x, weight, bias, running_mean, running_var, s, momentum, eps);
}

void forward_inference_cuda(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias,
                            const Tensor& running_mean, const Tensor& running_var, const BatchNormShape& s,
                            double eps) {
  CurrentDevice guard(x.device().index());
  if (cudnn_takes(s, x.dtype(), eps)) {
    const DType p = param_dtype(x.dtype());
    const Tensor w = ones_or(weight, s.c, p, x.device()), b = zeros_or(bias, s.c, p, x.device());
    cudnnHandle_t h = cudnn_handle(stream_of(x));
    BnDescs d(s, x.dtype(), CUDNN_BATCHNORM_SPATIAL);
    const Blend blend(x.dtype());
    cudnnStatus_t st = cudnnBatchNormalizationForwardInference(
        h, CUDNN_BATCHNORM_SPATIAL, blend.one(), blend.zero(), d.x.get(), x.data_ptr(), d.x.get(), y.data_ptr(),
        d.p.get(), w.data_ptr(), b.data_ptr(), running_mean.data_ptr(), running_var.data_ptr(), eps);
    if (!cudnn_not_supported(st)) {
      TS_CUDNN_CHECK(st);
      return;
    }
  }
  fallback_forward_inference(y, x, weight, bias, running_mean, running_var, eps);
}

// The training backward through cuDNN into dx / dw / db (all defined). Returns the cuDNN status.
cudnnStatus_t try_backward(const Tensor& dx, const Tensor& dw, const Tensor& db, const Tensor& dy, const Tensor& x,
                           const Tensor& w, const Tensor& mean_c, const Tensor& invstd, const Tensor& reserve,
                           const BatchNormShape& s, double eps) {
  cudnnHandle_t h = cudnn_handle(stream_of(x));
  const Blend blend(x.dtype());
  const cudnnBatchNormMode_t mode = preferred_mode(s, x.dtype(), true);
  {
    BnDescs d(s, x.dtype(), mode);
    size_t rs_bytes = 0;
    cudnnStatus_t st = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(h, mode, CUDNN_BATCHNORM_OPS_BN, nullptr,
                                                                            d.x.get(), &rs_bytes);
    const size_t have = reserve.defined() ? static_cast<size_t>(reserve.numel()) : 0;
    if (st == CUDNN_STATUS_SUCCESS && rs_bytes == have) {
      size_t ws_bytes = 0;
      st = cudnnGetBatchNormalizationBackwardExWorkspaceSize(h, mode, CUDNN_BATCHNORM_OPS_BN, d.x.get(), d.x.get(),
                                                             d.x.get(), nullptr, d.x.get(), d.p.get(), nullptr,
                                                             &ws_bytes);
      if (!cudnn_not_supported(st)) {
        TS_CUDNN_CHECK(st);
        DataPtr ws = ws_bytes > 0 ? allocate_workspace(ws_bytes) : DataPtr();
        st = cudnnBatchNormalizationBackwardEx(
            h, mode, CUDNN_BATCHNORM_OPS_BN, blend.one(), blend.zero(), blend.one(), blend.zero(), d.x.get(),
            x.data_ptr(), nullptr, nullptr, d.x.get(), dy.data_ptr(), nullptr, nullptr, d.x.get(), dx.data_ptr(),
            d.p.get(), w.data_ptr(), nullptr, dw.data_ptr(), db.data_ptr(), eps, mean_c.data_ptr(),
            invstd.data_ptr(), nullptr, ws.get(), ws_bytes, ptr_or_null(reserve), have);
        if (!cudnn_not_supported(st)) {
          TS_CUDNN_CHECK(st);
          return st;
        }
      }
    } else if (!cudnn_not_supported(st)) {
      TS_CUDNN_CHECK(st);
    }
  }
  // No usable reserve (or the preferred mode is not supported): the plain spatial backward.
  BnDescs d(s, x.dtype(), CUDNN_BATCHNORM_SPATIAL);
  cudnnStatus_t st = cudnnBatchNormalizationBackward(
      h, CUDNN_BATCHNORM_SPATIAL, blend.one(), blend.zero(), blend.one(), blend.zero(), d.x.get(), x.data_ptr(),
      d.x.get(), dy.data_ptr(), d.x.get(), dx.data_ptr(), d.p.get(), w.data_ptr(), dw.data_ptr(), db.data_ptr(), eps,
      mean_c.data_ptr(), invstd.data_ptr());
  if (!cudnn_not_supported(st)) TS_CUDNN_CHECK(st);
  return st;
}

void backward_cuda(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy, const Tensor& x,
                   const Tensor& weight, const Tensor& mean_c, const Tensor& invstd, const Tensor& reserve,
                   const BatchNormShape& s, bool training, double eps) {
  CurrentDevice guard(x.device().index());
  if (training && cudnn_takes(s, x.dtype(), eps)) {
    const DType p = param_dtype(x.dtype());
    // cuDNN writes all three results: scratch for the ones not wanted.
    const Tensor dx_ = dx.defined() ? dx : make_empty_strided(x.sizes(), x.strides(), x.dtype(), x.device());
    const Tensor dw_ = dweight.defined() ? dweight : make_empty({s.c}, p, x.device());
    const Tensor db_ = dbias.defined() ? dbias : make_empty({s.c}, p, x.device());
    const Tensor w = ones_or(weight, s.c, p, x.device());
    if (try_backward(dx_, dw_, db_, dy, x, w, mean_c, invstd, reserve, s, eps) == CUDNN_STATUS_SUCCESS) return;
  }
  fallback_backward(dx, dweight, dbias, dy, x, weight, mean_c, invstd, s, training);
}

}  // namespace

void register_batch_norm() {
  batch_norm_forward_training_kernel.set(DeviceType::CUDA, forward_training_cuda);
  batch_norm_forward_inference_kernel.set(DeviceType::CUDA, forward_inference_cuda);
  batch_norm_backward_kernel.set(DeviceType::CUDA, backward_cuda);
}

}  // namespace tessera::cuda
