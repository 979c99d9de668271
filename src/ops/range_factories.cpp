// arange, linspace, eye: factories whose values follow from their arguments, as PyTorch computes them
// (start + i * step, in the accumulate type). arange fills on the output's device through its kernel
// slot (ops/range_kernel.h); linspace is computed on the host and moved to the device; meta tensors
// get the shape only.
#include <cmath>

#include "ops/op_scope.h"
#include "ops/trace_hook.h"
#include "ops/op_utils.h"
#include "ops/range_kernel.h"
#include "tensor/dispatch_dtype.h"
#include "tessera/functions.h"

namespace tessera {

KernelSlot<ArangeKernelFn> arange_kernel("arange");

namespace {

Tensor finish(Tensor host, Device device) {
  if (device.is_cpu()) return host;
  if (device.is_meta()) return make_empty(host.sizes(), host.dtype(), device);
  return host.to(device);
}

}  // namespace

Tensor arange(const Scalar& end, TensorOptions opts) { return arange(0, end, 1, opts); }

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, TensorOptions opts) {
  OpScope scope(OpId::arange, {});
  const bool any_float = start.is_floating_point() || end.is_floating_point() || step.is_floating_point();
  DType dtype = opts.dtype_or(any_float ? kFloat32 : kInt64);
  double s = start.to_double(), e = end.to_double(), st = step.to_double();
  TS_CHECK(st != 0, ValueError, "arange: step must be nonzero");
  TS_CHECK(std::isfinite(s) && std::isfinite(e), ValueError, "arange: unsupported range: ", s, " -> ", e);
  TS_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), ValueError,
           "arange: upper bound and larger bound inconsistent with step sign (start ", s, ", end ", e, ", step ", st, ")");
  double n_d;
  if (!any_float && is_integral(dtype, true)) {
    int64_t si = start.to_int(), ei = end.to_int(), sti = step.to_int();
    n_d = static_cast<double>((ei - si + sti - (sti > 0 ? 1 : -1)) / sti);
  } else {
    n_d = std::ceil((e - s) / st);
  }
  TS_CHECK(n_d >= 0 && n_d < 9.2e18, ValueError, "arange: the number of elements (", n_d, ") is out of range");
  const int64_t n = static_cast<int64_t>(n_d);
  if (!opts.device.is_meta() && dtype == kBool) throw_unsupported_dtype("arange", dtype);
  Tensor out = make_empty({n}, dtype, opts.device);
  if (n > 0) arange_kernel(out.device(), out, start, step, /*integral=*/!any_float);
  if (capturing()) detail::trace_record(OpId::arange, {}, {out}, OpAttrs{.scalars = {start, end, step}});
  return out;
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions opts) {
  OpScope scope(OpId::linspace, {});
  TS_CHECK(steps >= 0, ValueError, "linspace: number of steps must be non-negative, got ", steps);
  DType dtype = opts.dtype_or(kFloat32);
  Tensor host = make_empty({steps}, dtype, kCPU);
  if (!opts.device.is_meta() && steps > 0) {
    dispatch_dtype<DTypeSet::AllNoBool>(dtype, "linspace", [&]<class T>(TypeTag<T>) {
      T* p = host.data_ptr<T>();
      const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
      // PyTorch fills the first half from the start and the second half from the end, symmetrically;
      // one step is the start alone (steps / 2 would put it in the second half: [end]).
      const int64_t half = steps == 1 ? 1 : steps / 2;
      for (int64_t i = 0; i < steps; ++i) {
        double v = i < half ? start + step * static_cast<double>(i) : end - step * static_cast<double>(steps - 1 - i);
        if constexpr (std::is_integral_v<T>) p[i] = static_cast<T>(v);
        else p[i] = static_cast<T>(static_cast<std::conditional_t<std::is_same_v<T, double>, double, float>>(v));
      }
    });
  }
  Tensor out = finish(host, opts.device);
  if (capturing()) detail::trace_record(OpId::linspace, {}, {out}, OpAttrs{.scalars = {start, end}, .ints = {steps}});
  return out;
}

Tensor eye(int64_t n, std::optional<int64_t> m_opt, TensorOptions opts) {
  OpScope scope(OpId::eye, {});
  int64_t m = m_opt.value_or(n);
  TS_CHECK(n >= 0 && m >= 0, ValueError, "eye: n and m must be non-negative, got ", n, " and ", m);
  Tensor t = zeros({n, m}, TensorOptions(opts.dtype_or(kFloat32), opts.device));
  if (!opts.device.is_meta() && n > 0 && m > 0) t.diagonal().fill_(1);
  return t;
}

}  // namespace tessera
