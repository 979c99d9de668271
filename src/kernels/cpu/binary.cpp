// CPU binary kernels: arithmetic, division modes, pow, min/max, fmod/remainder, atan2, bitwise ops
// and shifts, comparisons and logical ops.
//
// a and b arrive in the compute dtype (the op layer casts them); the output has that dtype or bool
// for the predicates. `binary_loop` has three contiguous fast paths the compiler vectorizes (both
// contiguous; b a broadcast scalar, as for `x + 2`; a a broadcast scalar) and a strided path.
// Integer division by zero cannot throw inside the parallel loop, so it raises a flag that is turned
// into PyTorch's ValueError("ZeroDivisionError") after the loop.
#include <atomic>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/elementwise_register.h"
#include "kernels/cpu/stream_store.h"
#include "kernels/cpu/vec_math.h"
#include "ops/elementwise_kernel.h"
#include "tensor/elementwise_iter.h"

namespace tessera::cpu::inline TS_CPU_ISA {  // Note [ISA namespaces]
namespace {

template <class In, class Out, class F>
void binary_loop(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  ElementwiseIter it(out, {&a, &b});
  constexpr int64_t so = sizeof(Out), si = sizeof(In);
  const bool stream = use_streaming_stores(it.numel(), so);  // Note [Streaming stores]
  it.for_each([&](char* const* p, const int64_t* st, int64_t n) {
    Out* o = reinterpret_cast<Out*>(p[0]);
    const In* x = reinterpret_cast<const In*>(p[1]);
    const In* y = reinterpret_cast<const In*>(p[2]);
    if (st[0] == so && st[1] == si && st[2] == si) {
      store_contiguous(o, n, stream, [&](int64_t i) TS_LAMBDA_INLINE { return f(x[i], y[i]); });
    } else if (st[0] == so && st[1] == si && st[2] == 0) {
      const In yv = *y;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], yv);
    } else if (st[0] == so && st[1] == 0 && st[2] == si) {
      const In xv = *x;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(xv, y[i]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<Out*>(p[0] + i * st[0]) =
            f(*reinterpret_cast<const In*>(p[1] + i * st[1]), *reinterpret_cast<const In*>(p[2] + i * st[2]));
    }
  });
}

// Python's floor division for floats, as PyTorch's div_floor_floating (exact where a / b rounds).
template <class A>
A div_floor_float(A a, A b) {
  if (b == A(0)) return a / b;
  A mod = std::fmod(a, b);
  A div = (a - mod) / b;
  if (mod != A(0) && (b < A(0)) != (mod < A(0))) div -= A(1);
  if (div == A(0)) return std::copysign(A(0), a / b);
  A fl = std::floor(div);
  if (div - fl > A(0.5)) fl += A(1);
  return fl;
}

template <class T>
T int_pow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp & 1) ? T(-1) : T(1);
      return 0;
    }
  }
  using U = std::make_unsigned_t<T>;  // wraps on overflow, as PyTorch's integer pow does
  U r = 1, bb = static_cast<U>(base);
  auto e = exp;
  while (e) {
    if (e & 1) r = static_cast<U>(r * bb);
    e >>= 1;
    bb = static_cast<U>(bb * bb);
  }
  return static_cast<T>(r);
}

template <class T>
void binary_arith(const Tensor& out, const Tensor& a, const Tensor& b, BinaryOp op, const BinaryParams& prm) {
  using A = acc_t<T>;
  constexpr bool is_bool = std::is_same_v<T, bool>;
  constexpr bool fp = std::is_floating_point_v<A>;
  bool ran = false;
  auto run = [&](auto f) {
    binary_loop<T, T>(out, a, b, [f](T x, T y) TS_LAMBDA_INLINE { return static_cast<T>(f(static_cast<A>(x), static_cast<A>(y))); });
    ran = true;
  };
  std::atomic<bool> div_by_zero{false};
  auto zero_div = [&div_by_zero]() { div_by_zero.store(true, std::memory_order_relaxed); };
  switch (op) {
    case BinaryOp::Add:
    case BinaryOp::Sub: {
      if constexpr (is_bool) {
        const bool alpha = prm.alpha.to_bool();
        run([alpha](A x, A y) TS_LAMBDA_INLINE { return x || (alpha && y); });
      } else {
        A alpha = fp ? static_cast<A>(prm.alpha.to_double()) : static_cast<A>(prm.alpha.to_int());
        if (op == BinaryOp::Sub) alpha = static_cast<A>(A(0) - alpha);
        if (alpha == A(1)) run([](A x, A y) TS_LAMBDA_INLINE { return x + y; });
        else run([alpha](A x, A y) TS_LAMBDA_INLINE { return x + alpha * y; });
      }
      return;
    }
    case BinaryOp::Mul:
      if constexpr (is_bool) run([](A x, A y) TS_LAMBDA_INLINE { return x && y; });
      else run([](A x, A y) TS_LAMBDA_INLINE { return x * y; });
      return;
    case BinaryOp::Div:
      if constexpr (fp) { run([](A x, A y) TS_LAMBDA_INLINE { return x / y; }); return; }
      break;
    case BinaryOp::DivTrunc:
      if constexpr (fp) {
        run([](A x, A y) TS_LAMBDA_INLINE { return std::trunc(x / y); });
        return;
      } else if constexpr (!is_bool) {
        run([zero_div](A x, A y) TS_LAMBDA_INLINE -> A {
          if (y == 0) { zero_div(); return 0; }
          if constexpr (std::is_signed_v<A>) if (y == -1) return static_cast<A>(A(0) - x);  // no INT_MIN / -1 trap
          return x / y;
        });
      }
      break;
    case BinaryOp::DivFloor:
      if constexpr (fp) {
        run([](A x, A y) TS_LAMBDA_INLINE { return div_floor_float(x, y); });
        return;
      } else if constexpr (!is_bool) {
        run([zero_div](A x, A y) TS_LAMBDA_INLINE -> A {
          if (y == 0) { zero_div(); return 0; }
          if constexpr (std::is_signed_v<A>) {
            if (y == -1) return static_cast<A>(A(0) - x);
            A q = x / y;
            if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
            return q;
          }
          return x / y;
        });
      }
      break;
    case BinaryOp::Pow:
      if constexpr (fp) { run([](A x, A y) TS_LAMBDA_INLINE { return std::pow(x, y); }); return; }
      else if constexpr (!is_bool) { run([](A x, A y) TS_LAMBDA_INLINE { return int_pow<A>(x, y); }); return; }
      break;
    case BinaryOp::Maximum:
      if constexpr (fp) run([](A x, A y) TS_LAMBDA_INLINE { return x != x ? x : (y != y ? y : (x > y ? x : y)); });
      else run([](A x, A y) TS_LAMBDA_INLINE { return x > y ? x : y; });
      return;
    case BinaryOp::Minimum:
      if constexpr (fp) run([](A x, A y) TS_LAMBDA_INLINE { return x != x ? x : (y != y ? y : (x < y ? x : y)); });
      else run([](A x, A y) TS_LAMBDA_INLINE { return x < y ? x : y; });
      return;
    case BinaryOp::Fmod:
      if constexpr (fp) {
        run([](A x, A y) TS_LAMBDA_INLINE { return std::fmod(x, y); });
        return;
      } else if constexpr (!is_bool) {
        run([zero_div](A x, A y) TS_LAMBDA_INLINE -> A {
          if (y == 0) { zero_div(); return 0; }
          if constexpr (std::is_signed_v<A>) if (y == -1) return 0;
          return x % y;
        });
      }
      break;
    case BinaryOp::Remainder:
      if constexpr (fp) {
        run([](A x, A y) TS_LAMBDA_INLINE {
          A m = std::fmod(x, y);
          if (m != A(0) && ((y < A(0)) != (m < A(0)))) m += y;
          return m;
        });
        return;
      } else if constexpr (!is_bool) {
        run([zero_div](A x, A y) TS_LAMBDA_INLINE -> A {
          if (y == 0) { zero_div(); return 0; }
          if constexpr (std::is_signed_v<A>) if (y == -1) return 0;
          A m = x % y;
          if constexpr (std::is_signed_v<A>) if (m != 0 && ((y < 0) != (m < 0))) m += y;
          return m;
        });
      }
      break;
    case BinaryOp::Atan2:
      if constexpr (fp) { run([](A x, A y) TS_LAMBDA_INLINE { return std::atan2(x, y); }); return; }
      break;
    case BinaryOp::LogAddExp:  // max + log1p(exp(-|x - y|)); equal infinities return themselves (no inf - inf)
      if constexpr (fp) {
        run([](A x, A y) TS_LAMBDA_INLINE -> A {
          if (std::isinf(x) && x == y) return x;
          const A m = x > y ? x : y;
          return m + std::log1p(std::exp(-std::fabs(x - y)));
        });
        return;
      }
      break;
    case BinaryOp::ThresholdBackward:
      if constexpr (!is_bool) {
        // PyTorch's comparison: a NaN input is not <= the threshold, so its gradient passes.
        const A t = fp ? static_cast<A>(prm.threshold) : static_cast<A>(static_cast<int64_t>(prm.threshold));
        run([t](A g, A y) TS_LAMBDA_INLINE { return y <= t ? A(0) : g; });
        return;
      }
      break;
    case BinaryOp::BitwiseAnd:
      if constexpr (!fp) { run([](A x, A y) TS_LAMBDA_INLINE { return static_cast<A>(x & y); }); return; }
      break;
    case BinaryOp::BitwiseOr:
      if constexpr (!fp) { run([](A x, A y) TS_LAMBDA_INLINE { return static_cast<A>(x | y); }); return; }
      break;
    case BinaryOp::BitwiseXor:
      if constexpr (!fp) { run([](A x, A y) TS_LAMBDA_INLINE { return static_cast<A>(x ^ y); }); return; }
      break;
    case BinaryOp::LeftShift:
      if constexpr (!fp && !is_bool) {
        // Shifts past the width (or negative) give 0, as PyTorch's lshift.
        constexpr A bits = static_cast<A>(sizeof(A) * 8);
        run([](A x, A y) TS_LAMBDA_INLINE -> A {
          using U = std::make_unsigned_t<A>;
          if (y < 0 || y >= bits) return 0;
          return static_cast<A>(static_cast<U>(x) << y);
        });
        return;
      }
      break;
    case BinaryOp::RightShift:
      if constexpr (!fp && !is_bool) {
        constexpr A bits = static_cast<A>(sizeof(A) * 8);
        run([](A x, A y) TS_LAMBDA_INLINE -> A {
          if (y < 0 || y >= bits) return x < 0 ? A(-1) : A(0);  // sign fill
          return static_cast<A>(x >> y);
        });
        return;
      }
      break;
    default: break;
  }
  if (div_by_zero.load()) TS_THROW(ValueError, "ZeroDivisionError");
  if (!ran) throw_unsupported_dtype("binary kernel", dtype_of_v<T>);
}

template <class T>
void binary_predicate(const Tensor& out, const Tensor& a, const Tensor& b, BinaryOp op) {
  using A = acc_t<T>;
  auto run = [&](auto f) {
    binary_loop<T, bool>(out, a, b, [f](T x, T y) TS_LAMBDA_INLINE { return f(static_cast<A>(x), static_cast<A>(y)); });
  };
  switch (op) {
    case BinaryOp::Eq: run([](A x, A y) TS_LAMBDA_INLINE { return x == y; }); break;
    case BinaryOp::Ne: run([](A x, A y) TS_LAMBDA_INLINE { return x != y; }); break;
    case BinaryOp::Lt: run([](A x, A y) TS_LAMBDA_INLINE { return x < y; }); break;
    case BinaryOp::Le: run([](A x, A y) TS_LAMBDA_INLINE { return x <= y; }); break;
    case BinaryOp::Gt: run([](A x, A y) TS_LAMBDA_INLINE { return x > y; }); break;
    case BinaryOp::Ge: run([](A x, A y) TS_LAMBDA_INLINE { return x >= y; }); break;
    case BinaryOp::LogicalAnd: run([](A x, A y) TS_LAMBDA_INLINE { return x != A(0) && y != A(0); }); break;
    case BinaryOp::LogicalOr: run([](A x, A y) TS_LAMBDA_INLINE { return x != A(0) || y != A(0); }); break;
    case BinaryOp::LogicalXor: run([](A x, A y) TS_LAMBDA_INLINE { return (x != A(0)) != (y != A(0)); }); break;
    default: TS_THROW(ValueError, "binary kernel: op ", int(op), " is not a predicate");
  }
}

void binary_cpu(const Tensor& out, const Tensor& a, const Tensor& b, BinaryOp op, const BinaryParams& p) {
  if (out.numel() == 0) return;
  dispatch_dtype(a.dtype(), "binary", [&]<class T>(TypeTag<T>) {
    if (is_predicate(op)) binary_predicate<T>(out, a, b, op);
    else binary_arith<T>(out, a, b, op, p);
  });
}

}  // namespace

void register_binary() { binary_kernel.set(DeviceType::CPU, &binary_cpu); }

}  // namespace tessera::cpu::TS_CPU_ISA
