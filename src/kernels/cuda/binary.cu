// CUDA binary kernels: arithmetic, the division modes, pow, min/max, fmod/remainder, atan2, bitwise
// ops and shifts, comparisons and logical ops, with the semantics of the CPU's (kernels/cpu/binary.cpp).
//
// a and b arrive in the compute dtype and broadcast to out (a number operand is a 0-dim CPU tensor,
// whose value travels as a kernel argument: Note [CPU scalars]); out has that dtype or
// bool for the predicates. add/sub (one functor: a + alpha * b, alpha negated for sub), mul and
// floating div have a functor each (no switch in the loop, kEwHotUnroll vectors per thread); the
// other ops share one functor per dtype that switches on the uniform op, as do the predicates.
// alpha is converted on the host into the accumulate type (float for the 16-bit floats), as on the
// CPU. Integer division, floor division, fmod and remainder by zero raise ValueError through a
// device flag (Note [GPU division by zero]); they alone synchronize the stream.
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/elementwise_math.cuh"
#include "ops/elementwise_kernel.h"
#include "runtime/cuda/graph_capture.h"

namespace tessera::cuda {
namespace {

// ---- hot ops ---------------------------------------------------------------------------------------
template <class T>
struct AddOp {  // a + alpha * b (sub: alpha negated); bool: a || (alpha && b)
  using A = dacc_t<T>;
  A alpha;
  __device__ T operator()(T x, T y) const {
    if constexpr (std::is_same_v<T, bool>) return x || (alpha && y);
    else return convert<T>(static_cast<A>(convert<A>(x) + alpha * convert<A>(y)));
  }
};
template <class T>
struct MulOp {
  __device__ T operator()(T x, T y) const {
    using A = dacc_t<T>;
    if constexpr (std::is_same_v<T, bool>) return x && y;
    else return convert<T>(static_cast<A>(convert<A>(x) * convert<A>(y)));
  }
};
template <class T>
struct DivOp {  // floating only
  __device__ T operator()(T x, T y) const {
    using A = dacc_t<T>;
    return convert<T>(convert<A>(x) / convert<A>(y));
  }
};

template <class T>
struct ThresholdBackwardOp {  // y <= threshold ? 0 : g (a NaN y passes g, as PyTorch)
  dacc_t<T> threshold;
  __device__ T operator()(T g, T y) const { return convert<dacc_t<T>>(y) <= threshold ? convert<T>(dacc_t<T>(0)) : g; }
};

// ---- the other floating ops ----------------------------------------------------------------------------
template <class T>
struct BinaryFloatingOp {
  BinaryOp op;
  __device__ T operator()(T xt, T yt) const {
    using A = dacc_t<T>;
    const A x = convert<A>(xt), y = convert<A>(yt);
    A r;
    switch (op) {
      case BinaryOp::DivTrunc: r = dm::trunc(x / y); break;
      case BinaryOp::DivFloor: r = dm::div_floor_float(x, y); break;
      case BinaryOp::Pow: r = dm::pow(x, y); break;
      case BinaryOp::Maximum: r = dm::nan_max(x, y); break;
      case BinaryOp::Minimum: r = dm::nan_min(x, y); break;
      case BinaryOp::Fmod: r = dm::fmod(x, y); break;
      case BinaryOp::Remainder: r = dm::remainder_float(x, y); break;
      case BinaryOp::LogAddExp:  // equal infinities return themselves (no inf - inf)
        r = (x == y && (x == dm::inf<A>() || x == -dm::inf<A>())) ? x : (x > y ? x : y) + dm::log1p(dm::exp(-dm::fabs(x - y)));
        break;
      default: r = dm::atan2(x, y); break;  // Atan2 (the host refuses the rest)
    }
    return convert<T>(r);
  }
};

bool floating_takes(BinaryOp op) {
  switch (op) {
    case BinaryOp::DivTrunc: case BinaryOp::DivFloor: case BinaryOp::Pow: case BinaryOp::Maximum:
    case BinaryOp::Minimum: case BinaryOp::Fmod: case BinaryOp::Remainder: case BinaryOp::Atan2:
    case BinaryOp::LogAddExp:
      return true;
    default: return false;
  }
}

// ---- integer ops (and bool's) ---------------------------------------------------------------------------
template <class T>
struct BinaryIntegralOp {
  BinaryOp op;
  int* zero_division;  // Note [GPU division by zero]; null unless op divides
  __device__ T operator()(T x, T y) const {
    if constexpr (std::is_same_v<T, bool>) {
      switch (op) {
        case BinaryOp::Maximum: return x > y ? x : y;
        case BinaryOp::Minimum: return x < y ? x : y;
        case BinaryOp::BitwiseAnd: return static_cast<bool>(x & y);
        case BinaryOp::BitwiseOr: return static_cast<bool>(x | y);
        default: return static_cast<bool>(x ^ y);  // BitwiseXor
      }
    } else {
      constexpr bool is_signed = std::is_signed_v<T>;
      switch (op) {
        case BinaryOp::DivTrunc:
          if (y == 0) { *zero_division = 1; return 0; }
          if constexpr (is_signed) if (y == -1) return static_cast<T>(T(0) - x);  // no INT_MIN / -1 trap
          return static_cast<T>(x / y);
        case BinaryOp::DivFloor: {
          if (y == 0) { *zero_division = 1; return 0; }
          if constexpr (is_signed) {
            if (y == -1) return static_cast<T>(T(0) - x);
            T q = static_cast<T>(x / y);
            if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
            return q;
          }
          return static_cast<T>(x / y);
        }
        case BinaryOp::Pow: return dm::int_pow<T>(x, y);
        case BinaryOp::Maximum: return x > y ? x : y;
        case BinaryOp::Minimum: return x < y ? x : y;
        case BinaryOp::Fmod:
          if (y == 0) { *zero_division = 1; return 0; }
          if constexpr (is_signed) if (y == -1) return 0;
          return static_cast<T>(x % y);
        case BinaryOp::Remainder: {
          if (y == 0) { *zero_division = 1; return 0; }
          if constexpr (is_signed) if (y == -1) return 0;
          T m = static_cast<T>(x % y);
          if constexpr (is_signed) if (m != 0 && ((y < 0) != (m < 0))) m = static_cast<T>(m + y);
          return m;
        }
        case BinaryOp::BitwiseAnd: return static_cast<T>(x & y);
        case BinaryOp::BitwiseOr: return static_cast<T>(x | y);
        case BinaryOp::BitwiseXor: return static_cast<T>(x ^ y);
        case BinaryOp::LeftShift: {
          // Shifts past the width (or negative) give 0, as PyTorch's lshift.
          constexpr T bits = static_cast<T>(sizeof(T) * 8);
          using U = std::make_unsigned_t<T>;
          if (y < 0 || y >= bits) return 0;
          return static_cast<T>(static_cast<U>(x) << y);
        }
        default: {  // RightShift: sign fill past the width
          constexpr T bits = static_cast<T>(sizeof(T) * 8);
          if (y < 0 || y >= bits) return x < 0 ? T(-1) : T(0);
          return static_cast<T>(x >> y);
        }
      }
    }
  }
};

bool integral_takes(BinaryOp op, bool is_bool) {
  switch (op) {
    case BinaryOp::Maximum: case BinaryOp::Minimum: case BinaryOp::BitwiseAnd: case BinaryOp::BitwiseOr:
    case BinaryOp::BitwiseXor:
      return true;
    case BinaryOp::DivTrunc: case BinaryOp::DivFloor: case BinaryOp::Pow: case BinaryOp::Fmod:
    case BinaryOp::Remainder: case BinaryOp::LeftShift: case BinaryOp::RightShift:
      return !is_bool;
    default: return false;
  }
}

bool divides(BinaryOp op) {
  return op == BinaryOp::DivTrunc || op == BinaryOp::DivFloor || op == BinaryOp::Fmod || op == BinaryOp::Remainder;
}

// ---- predicates --------------------------------------------------------------------------------------------
template <class T>
struct BinaryPredicateOp {
  BinaryOp op;
  __device__ bool operator()(T xt, T yt) const {
    using A = dacc_t<T>;
    const A x = convert<A>(xt), y = convert<A>(yt);
    switch (op) {
      case BinaryOp::Eq: return x == y;
      case BinaryOp::Ne: return x != y;
      case BinaryOp::Lt: return x < y;
      case BinaryOp::Le: return x <= y;
      case BinaryOp::Gt: return x > y;
      case BinaryOp::Ge: return x >= y;
      case BinaryOp::LogicalAnd: return x != A(0) && y != A(0);
      case BinaryOp::LogicalOr: return x != A(0) || y != A(0);
      default: return (x != A(0)) != (y != A(0));  // LogicalXor
    }
  }
};

void binary_cuda(const Tensor& out, const Tensor& a, const Tensor& b, BinaryOp op, const BinaryParams& p) {
  if (out.numel() == 0) return;
  CurrentDevice guard(out.device().index());
  const ElementwiseIter it(out, {&a, &b});
  const cudaStream_t stream = stream_of(out);
  HostScalars host;  // Note [CPU scalars]: numbers travel as kernel arguments
  if (a.device().is_cpu()) host.set(1, a);
  if (b.device().is_cpu()) host.set(2, b);
  dispatch_device_dtype(a.dtype(), "binary", [&]<class T>(TypeTag<T>) {
    using A = dacc_t<T>;
    constexpr bool fp = is_floating_v<T>;
    constexpr bool is_bool = std::is_same_v<T, bool>;
    if (is_predicate(op)) {
      launch_elementwise<1, bool, T, T>(it, BinaryPredicateOp<T>{op}, stream, "binary", host);
      return;
    }
    switch (op) {
      case BinaryOp::Add:
      case BinaryOp::Sub: {
        AddOp<T> f{};
        if constexpr (is_bool) {
          f.alpha = p.alpha.to_bool();
        } else {
          A alpha = fp ? static_cast<A>(p.alpha.to_double()) : static_cast<A>(p.alpha.to_int());
          if (op == BinaryOp::Sub) alpha = static_cast<A>(A(0) - alpha);
          f.alpha = alpha;
        }
        launch_elementwise<kEwHotUnroll, T, T, T>(it, f, stream, op == BinaryOp::Add ? "add" : "sub", host);
        return;
      }
      case BinaryOp::Mul: launch_elementwise<kEwHotUnroll, T, T, T>(it, MulOp<T>{}, stream, "mul", host); return;
      case BinaryOp::Div:
        if constexpr (fp) {
          launch_elementwise<kEwHotUnroll, T, T, T>(it, DivOp<T>{}, stream, "div", host);
          return;
        }
        break;
      case BinaryOp::ThresholdBackward:
        if constexpr (!is_bool) {
          const A t = fp ? static_cast<A>(p.threshold) : static_cast<A>(static_cast<int64_t>(p.threshold));
          launch_elementwise<kEwHotUnroll, T, T, T>(it, ThresholdBackwardOp<T>{t}, stream, "threshold_backward",
                                                    host);
          return;
        }
        break;
      default: break;
    }
    if constexpr (fp) {
      if (floating_takes(op)) {
        launch_elementwise<1, T, T, T>(it, BinaryFloatingOp<T>{op}, stream, "binary", host);
        return;
      }
    } else {
      if (integral_takes(op, is_bool)) {
        if (divides(op)) {
          ZeroDivisionFlag flag(stream);
          launch_elementwise<1, T, T, T>(it, BinaryIntegralOp<T>{op, flag.device_ptr()}, stream, "binary", host);
          // Inside a captured CUDA graph the flag cannot come back to the host: the check does not run
          // there (as PyTorch, whose integer division by zero never raises on the GPU).
          if (!stream_is_captured(stream)) flag.check();
        } else {
          launch_elementwise<1, T, T, T>(it, BinaryIntegralOp<T>{op, nullptr}, stream, "binary", host);
        }
        return;
      }
    }
    throw_unsupported_dtype("binary kernel", a.dtype());
  });
}

}  // namespace

void register_binary_cuda() { binary_kernel.set(DeviceType::CUDA, &binary_cuda); }

}  // namespace tessera::cuda
