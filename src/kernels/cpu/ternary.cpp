// CPU ternary kernels (where, lerp, addcmul, addcdiv, clamp) and the allclose test.
//
// Inputs arrive in the compute dtype (where's condition as bool). `ternary_loop` takes the
// contiguous fast path when every operand is contiguous or a broadcast scalar (stride 0) along the
// inner dim, indexing each operand by its own stride so one loop serves both; the compiler
// vectorizes it. Everything else goes through the strided path.
#include <atomic>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/elementwise_register.h"
#include "kernels/cpu/vec_math.h"
#include "ops/elementwise_kernel.h"
#include "tensor/elementwise_iter.h"

namespace tessera::cpu {
namespace {

template <class Out, class In0, class In1, class In2, class F>
void ternary_loop(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, F f) {
  ElementwiseIter it(out, {&a, &b, &c});
  const int64_t es[4] = {sizeof(Out), sizeof(In0), sizeof(In1), sizeof(In2)};
  it.for_each([&](char* const* p, const int64_t* st, int64_t n) {
    if (st[0] == es[0] && (st[1] == es[1] || st[1] == 0) && (st[2] == es[2] || st[2] == 0) &&
        (st[3] == es[3] || st[3] == 0)) {
      Out* o = reinterpret_cast<Out*>(p[0]);
      const In0* x = reinterpret_cast<const In0*>(p[1]);
      const In1* y = reinterpret_cast<const In1*>(p[2]);
      const In2* z = reinterpret_cast<const In2*>(p[3]);
      const int64_t sx = st[1] ? 1 : 0, sy = st[2] ? 1 : 0, sz = st[3] ? 1 : 0;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i * sx], y[i * sy], z[i * sz]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<Out*>(p[0] + i * st[0]) = f(*reinterpret_cast<const In0*>(p[1] + i * st[1]),
                                                      *reinterpret_cast<const In1*>(p[2] + i * st[2]),
                                                      *reinterpret_cast<const In2*>(p[3] + i * st[3]));
    }
  });
}

// PyTorch's lerp: exact at weight 0 and at weight 1.
template <class A>
inline A lerp_value(A s, A e, A w) {
  return std::abs(w) < A(0.5) ? s + w * (e - s) : e - (e - s) * (A(1) - w);
}

template <class A>
inline A nan_max(A x, A y) {
  if constexpr (std::is_floating_point_v<A>) return x != x ? x : (y != y ? y : (x > y ? x : y));
  else return x > y ? x : y;
}
template <class A>
inline A nan_min(A x, A y) {
  if constexpr (std::is_floating_point_v<A>) return x != x ? x : (y != y ? y : (x < y ? x : y));
  else return x < y ? x : y;
}

template <class T>
void ternary_typed(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, TernaryOp op,
                   const TernaryParams& prm) {
  using A = acc_t<T>;
  constexpr bool fp = std::is_floating_point_v<A>;
  auto run = [&](auto f) {
    ternary_loop<T, T, T, T>(out, a, b, c, [f](T x, T y, T z) TS_LAMBDA_INLINE {
      return static_cast<T>(f(static_cast<A>(x), static_cast<A>(y), static_cast<A>(z)));
    });
  };
  const A value = fp ? static_cast<A>(prm.value.to_double()) : static_cast<A>(prm.value.to_int());
  switch (op) {
    case TernaryOp::Where:
      ternary_loop<T, bool, T, T>(out, a, b, c, [](bool m, T y, T z) TS_LAMBDA_INLINE { return m ? y : z; });
      return;
    case TernaryOp::Lerp:
      if constexpr (fp) {
        if (!prm.value_weight) {
          run([](A s, A e, A w) TS_LAMBDA_INLINE { return lerp_value(s, e, w); });
        } else {  // scalar weight, kept in the accumulate type rather than rounded to T
          run([value](A s, A e, A) TS_LAMBDA_INLINE { return lerp_value(s, e, value); });
        }
        return;
      }
      break;
    case TernaryOp::Addcmul:
      if constexpr (!std::is_same_v<T, bool>) { run([value](A s, A x, A y) TS_LAMBDA_INLINE { return s + value * x * y; }); return; }
      break;
    case TernaryOp::Addcdiv:
      if constexpr (fp) { run([value](A s, A x, A y) TS_LAMBDA_INLINE { return s + value * (x / y); }); return; }
      break;
    case TernaryOp::Clamp:
      if constexpr (!std::is_same_v<T, bool>) {
        if (prm.has_min && prm.has_max) run([](A x, A lo, A hi) TS_LAMBDA_INLINE { return nan_min(nan_max(x, lo), hi); });
        else if (prm.has_min) run([](A x, A lo, A) TS_LAMBDA_INLINE { return nan_max(x, lo); });
        else run([](A x, A, A hi) TS_LAMBDA_INLINE { return nan_min(x, hi); });
        return;
      }
      break;
  }
  throw_unsupported_dtype("ternary kernel", dtype_of_v<T>);
}

void ternary_cpu(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, TernaryOp op,
                 const TernaryParams& p) {
  if (out.numel() == 0) return;
  dispatch_dtype(out.dtype(), "ternary", [&]<class T>(TypeTag<T>) { ternary_typed<T>(out, a, b, c, op, p); });
}

void allclose_cpu(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan, bool* result) {
  std::atomic<bool> ok{true};
  if (a.numel() > 0) {
    dispatch_dtype(a.dtype(), "allclose", [&]<class T>(TypeTag<T>) {
      using A = std::conditional_t<std::is_floating_point_v<acc_t<T>>, double, acc_t<T>>;
      ElementwiseIter it(a, {&b});  // a only read; it is operand 0 for its shape
      it.for_each([&](char* const* p, const int64_t* st, int64_t n) {
        bool all = true;
        for (int64_t i = 0; i < n; ++i) {
          const A x = static_cast<A>(static_cast<acc_t<T>>(*reinterpret_cast<const T*>(p[0] + i * st[0])));
          const A y = static_cast<A>(static_cast<acc_t<T>>(*reinterpret_cast<const T*>(p[1] + i * st[1])));
          bool close = x == y;
          if constexpr (std::is_floating_point_v<A>) {
            if (!close && equal_nan && x != x && y != y) close = true;
            if (!close && std::isfinite(x) && std::isfinite(y))
              close = std::abs(x - y) <= atol + rtol * std::abs(y);
          }
          all = all && close;
        }
        if (!all) ok.store(false, std::memory_order_relaxed);
      });
    });
  }
  *result = ok.load();
}

}  // namespace

void register_ternary() {
  ternary_kernel.set(DeviceType::CPU, &ternary_cpu);
  allclose_kernel.set(DeviceType::CPU, &allclose_cpu);
}

}  // namespace tessera::cpu
