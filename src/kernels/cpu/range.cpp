// CPU kernel of arange (ops/range_kernel.h): the value of element i is computed from i alone, so the
// fill splits over threads with no carried state and gives the same bits whatever the thread count.
#include <type_traits>

#include "kernels/cpu/cpu_kernels.h"
#include "ops/range_kernel.h"
#include "tensor/dispatch_dtype.h"

namespace tessera::cpu {
namespace {

void arange_cpu(const Tensor& out, const Scalar& start, const Scalar& step, bool integral) {
  const int64_t n = out.numel();
  if (n == 0) return;
  dispatch_dtype<DTypeSet::AllNoBool>(out.dtype(), "arange", [&]<class T>(TypeTag<T>) {
    T* p = static_cast<T*>(out.data_ptr());
    if (integral) {
      const int64_t si = start.to_int(), sti = step.to_int();
#pragma omp parallel for schedule(static) if (n > 65536)
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<acc_t<T>>(si + i * sti));
    } else {
      using A = std::conditional_t<std::is_same_v<T, double>, double, acc_t<T>>;
      const double s = start.to_double(), st = step.to_double();
#pragma omp parallel for schedule(static) if (n > 65536)
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<A>(s + static_cast<double>(i) * st));
    }
  });
}

}  // namespace

void register_range() { arange_kernel.set(DeviceType::CPU, &arange_cpu); }

}  // namespace tessera::cpu
