// CUDA kernel of arange (ops/range_kernel.h): a thread per element computes start + i * step the way
// the CPU kernel does (int64 for integral arguments; double otherwise, with the multiply and the add
// rounded separately as on the host, then rounded to the accumulate type and to the dtype), so a cuda
// arange holds the CPU's values bit for bit. 64-bit positions past 2^31 elements.
#include "kernels/cuda/index_common.cuh"
#include "ops/range_kernel.h"

namespace tessera::cuda {
namespace {

template <class T, class I>
static __global__ void arange_kernel_impl(T* out, I n, int64_t si, int64_t sti, double s, double st, bool integral) {
  // The CPU's accumulate type: float for the 16-bit floats; for floating arguments double stays double.
  using A = std::conditional_t<std::is_same_v<T, double>, double, dacc_t<T>>;
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < n; i += I(gridDim.x) * blockDim.x) {
    if (integral) {
      const int64_t v = static_cast<int64_t>(static_cast<uint64_t>(si) + static_cast<uint64_t>(i) * static_cast<uint64_t>(sti));
      out[i] = convert<T>(static_cast<dacc_t<T>>(v));
    } else {
      const double v = __dadd_rn(s, __dmul_rn(static_cast<double>(i), st));
      out[i] = convert<T>(static_cast<A>(v));
    }
  }
}

void arange_cuda(const Tensor& out, const Scalar& start, const Scalar& step, bool integral) {
  const int64_t n = out.numel();
  if (n == 0) return;
  CurrentDevice g(out.device().index());
  cudaStream_t stream = stream_of(out);
  dispatch_device_dtype<DTypeSet::AllNoBool>(out.dtype(), "arange", [&]<class T>(TypeTag<T>) {
    dispatch_index(fits32({n}), [&]<class I>(TypeTag<I>) {
      arange_kernel_impl<T, I><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(out.data_ptr()), static_cast<I>(n),
                                                                        start.to_int(), step.to_int(), start.to_double(),
                                                                        step.to_double(), integral);
      check_launch("arange", "arange_kernel");
    });
  });
}

}  // namespace

void register_range() { arange_kernel.set(DeviceType::CUDA, &arange_cuda); }

}  // namespace tessera::cuda
