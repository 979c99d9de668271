// CPU copy (with dtype conversion and any strides) and fill.
#include <cstring>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu_kernels.h"
#include "ops/copy_kernel.h"
#include "tensor/elementwise_iter.h"

namespace tessera::cpu::inline TS_CPU_ISA {  // Note [ISA namespaces]
namespace {

void copy_cpu(const Tensor& dst, const Tensor& src) {
  TS_CHECK(dst.is_cpu() && src.is_cpu(), DeviceError, "copy_: the CPU kernel got tensors on ", src.device().str(),
           " and ", dst.device().str(), " (copies to or from a GPU need the CUDA backend)");
  if (dst.numel() == 0) return;
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous() && src.sizes() == dst.sizes() &&
      !src.strides().empty() && src.strides() == dst.strides()) {
    std::memmove(dst.data_ptr(), src.data_ptr(), dst.nbytes());
    return;
  }
  ElementwiseIter it(dst, {&src});
  const int64_t es[2] = {static_cast<int64_t>(dst.element_size()), static_cast<int64_t>(src.element_size())};
  const bool contig = it.is_contiguous_inner(es);
  dispatch_dtype(dst.dtype(), "copy_", [&]<class D>(TypeTag<D>) {
    dispatch_dtype(src.dtype(), "copy_", [&]<class S>(TypeTag<S>) {
      it.for_each([&](char* const* p, const int64_t* st, int64_t n) {
        D* o = reinterpret_cast<D*>(p[0]);
        const char* in = p[1];
        if (contig && st[1] == es[1]) {
          const S* s = reinterpret_cast<const S*>(in);
          for (int64_t i = 0; i < n; ++i) o[i] = convert<D>(s[i]);
        } else if (contig && st[1] == 0) {
          D v = convert<D>(*reinterpret_cast<const S*>(in));
          for (int64_t i = 0; i < n; ++i) o[i] = v;
        } else {
          char* out = p[0];
          for (int64_t i = 0; i < n; ++i)
            *reinterpret_cast<D*>(out + i * st[0]) = convert<D>(*reinterpret_cast<const S*>(in + i * st[1]));
        }
      });
    });
  });
}

void fill_cpu(const Tensor& dst, const Scalar& value) {
  if (dst.numel() == 0) return;
  ElementwiseIter it(dst, {});
  dispatch_dtype(dst.dtype(), "fill_", [&]<class D>(TypeTag<D>) {
    D v = value.is_floating_point() ? convert<D>(value.to_double()) : convert<D>(value.to_int());
    if (value.is_bool()) v = convert<D>(value.to_bool());
    it.for_each([&](char* const* p, const int64_t* st, int64_t n) {
      if (st[0] == static_cast<int64_t>(sizeof(D))) {
        D* o = reinterpret_cast<D*>(p[0]);
        for (int64_t i = 0; i < n; ++i) o[i] = v;
      } else {
        for (int64_t i = 0; i < n; ++i) *reinterpret_cast<D*>(p[0] + i * st[0]) = v;
      }
    });
  });
}

}  // namespace

void register_copy() {
  copy_kernel.set(DeviceType::CPU, &copy_cpu);
  fill_kernel.set(DeviceType::CPU, &fill_cpu);
}

}  // namespace tessera::cpu::TS_CPU_ISA
