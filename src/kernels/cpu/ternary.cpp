// CPU ternary kernels (where, lerp, addcmul, addcdiv, clamp) and the allclose test.
//
// Inputs arrive in the compute dtype (where's condition as bool). `ternary_loop` has contiguous fast
// paths the compiler vectorizes: all operands contiguous, the third or the second a broadcast scalar
// (where(mask, g, 0) and where(mask, 0, g), as the derivatives use it), and a general one where each
// operand is contiguous or broadcast (stride 0), indexed by its own stride. Everything else goes
// through the strided path.
#include <atomic>
#include <cmath>
#include <type_traits>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/elementwise_register.h"
#include "kernels/cpu/vec_math.h"
#include "ops/elementwise_kernel.h"
#include "tensor/elementwise_iter.h"

namespace tessera::cpu::inline TS_CPU_ISA {  // Note [ISA namespaces]
namespace {

// A bool operand is loaded through its byte and converted per element: GCC does not vectorize a loop
// that loads bool (it has no vector type for it), and where's select then compiles to a branch per
// element, which mispredicts on every other element of a random mask (a ReLU's backward).
template <class T>
struct LoadAs {
  using type = T;
};
template <>
struct LoadAs<bool> {
  using type = uint8_t;
};
template <class T>
const typename LoadAs<T>::type* load_ptr(const char* p) {
  return reinterpret_cast<const typename LoadAs<T>::type*>(p);
}

template <class Out, class In0, class In1, class In2, class F>
void ternary_loop(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, F f) {
  ElementwiseIter it(out, {&a, &b, &c});
  const int64_t es[4] = {sizeof(Out), sizeof(In0), sizeof(In1), sizeof(In2)};
  it.for_each([&](char* const* p, const int64_t* st, int64_t n) {
    Out* o = reinterpret_cast<Out*>(p[0]);
    const auto* x = load_ptr<In0>(p[1]);
    const auto* y = load_ptr<In1>(p[2]);
    const auto* z = load_ptr<In2>(p[3]);
    const bool cx = st[1] == es[1], cy = st[2] == es[2], cz = st[3] == es[3];
    if (st[0] != es[0]) {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<Out*>(p[0] + i * st[0]) = f(static_cast<In0>(*load_ptr<In0>(p[1] + i * st[1])),
                                                      static_cast<In1>(*load_ptr<In1>(p[2] + i * st[2])),
                                                      static_cast<In2>(*load_ptr<In2>(p[3] + i * st[3])));
    } else if (cx && cy && cz) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(static_cast<In0>(x[i]), static_cast<In1>(y[i]), static_cast<In2>(z[i]));
    } else if (cx && cy && st[3] == 0) {  // where(mask, g, 0), clamp(x, lo, hi) with hi a scalar
      const In2 zv = static_cast<In2>(*z);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(static_cast<In0>(x[i]), static_cast<In1>(y[i]), zv);
    } else if (cx && st[2] == 0 && cz) {  // where(mask, 0, g)
      const In1 yv = static_cast<In1>(*y);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(static_cast<In0>(x[i]), yv, static_cast<In2>(z[i]));
    } else if ((cx || st[1] == 0) && (cy || st[2] == 0) && (cz || st[3] == 0)) {
      const int64_t sx = st[1] ? 1 : 0, sy = st[2] ? 1 : 0, sz = st[3] ? 1 : 0;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i)
        o[i] = f(static_cast<In0>(x[i * sx]), static_cast<In1>(y[i * sy]), static_cast<In2>(z[i * sz]));
    } else {
      for (int64_t i = 0; i < n; ++i)
        o[i] = f(static_cast<In0>(*load_ptr<In0>(p[1] + i * st[1])), static_cast<In1>(*load_ptr<In1>(p[2] + i * st[2])),
                 static_cast<In2>(*load_ptr<In2>(p[3] + i * st[3])));
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

}  // namespace tessera::cpu::TS_CPU_ISA
