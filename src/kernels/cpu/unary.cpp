// CPU unary kernels: math functions, rounding, sign, bitwise not, predicates (isnan, ...).
//
// The op layer hands over x already in the compute dtype and an output of that dtype (bool for the
// predicates), so each op here is one lambda on the accumulate type, run by `unary_loop`: a
// contiguous fast path the compiler vectorizes (`#pragma omp simd`; float32 transcendental calls go
// to vec_math.h, which vectorizes where libm does not) and a strided path for everything else.
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
void unary_loop(const Tensor& out, const Tensor& x, F f) {
  ElementwiseIter it(out, {&x});
  const bool stream = use_streaming_stores(it.numel(), sizeof(Out));  // Note [Streaming stores]
  it.for_each([&](char* const* p, const int64_t* st, int64_t n) {
    if (st[0] == static_cast<int64_t>(sizeof(Out)) && st[1] == static_cast<int64_t>(sizeof(In))) {
      // out may be x itself (in place); each element is read before it is written.
      Out* o = reinterpret_cast<Out*>(p[0]);
      const In* a = reinterpret_cast<const In*>(p[1]);
      store_contiguous(o, n, stream, [&](int64_t i) TS_LAMBDA_INLINE { return f(a[i]); });
    } else {
      char* o = p[0];
      const char* a = p[1];
      for (int64_t i = 0; i < n; ++i)
        *reinterpret_cast<Out*>(o + i * st[0]) = f(*reinterpret_cast<const In*>(a + i * st[1]));
    }
  });
}

// Transcendentals on the accumulate type: vec_math for float (vectorizes), libm for double.
TS_VEC_INLINE float m_exp(float v) { return vec::exp(v); }
TS_VEC_INLINE double m_exp(double v) { return std::exp(v); }
TS_VEC_INLINE float m_log(float v) { return vec::log(v); }
TS_VEC_INLINE double m_log(double v) { return std::log(v); }
TS_VEC_INLINE float m_tanh(float v) { return vec::tanh(v); }
TS_VEC_INLINE double m_tanh(double v) { return std::tanh(v); }
TS_VEC_INLINE float m_erf(float v) { return vec::erf(v); }
TS_VEC_INLINE double m_erf(double v) { return std::erf(v); }
TS_VEC_INLINE float m_gelu(float v) { return vec::gelu(v); }
TS_VEC_INLINE double m_gelu(double v) { return 0.5 * v * (1.0 + std::erf(v * 0.70710678118654752440)); }
TS_VEC_INLINE float m_sigmoid(float v) { return vec::sigmoid(v); }
TS_VEC_INLINE double m_sigmoid(double v) { return v < 0 ? std::exp(v) / (1.0 + std::exp(v)) : 1.0 / (1.0 + std::exp(-v)); }

template <class T>
void unary_floating(const Tensor& out, const Tensor& x, UnaryOp op, const UnaryParams& prm) {
  using A = acc_t<T>;
  auto run = [&](auto f) { unary_loop<T, T>(out, x, [f](T v) TS_LAMBDA_INLINE { return static_cast<T>(f(static_cast<A>(v))); }); };
  const A inf = std::numeric_limits<A>::infinity();
  switch (op) {
    case UnaryOp::Neg: run([](A v) TS_LAMBDA_INLINE { return -v; }); break;
    case UnaryOp::Abs: run([](A v) TS_LAMBDA_INLINE { return std::fabs(v); }); break;
    case UnaryOp::Exp: run([](A v) TS_LAMBDA_INLINE { return m_exp(v); }); break;
    case UnaryOp::Exp2: run([](A v) TS_LAMBDA_INLINE { return std::exp2(v); }); break;
    case UnaryOp::Log: run([](A v) TS_LAMBDA_INLINE { return m_log(v); }); break;
    case UnaryOp::Log2: run([](A v) TS_LAMBDA_INLINE { return std::log2(v); }); break;
    case UnaryOp::Log1p: run([](A v) TS_LAMBDA_INLINE { return std::log1p(v); }); break;
    case UnaryOp::Expm1: run([](A v) TS_LAMBDA_INLINE { return std::expm1(v); }); break;
    case UnaryOp::Sqrt: run([](A v) TS_LAMBDA_INLINE { return std::sqrt(v); }); break;
    case UnaryOp::Rsqrt: run([](A v) TS_LAMBDA_INLINE { return A(1) / std::sqrt(v); }); break;
    case UnaryOp::Sin: run([](A v) TS_LAMBDA_INLINE { return std::sin(v); }); break;
    case UnaryOp::Cos: run([](A v) TS_LAMBDA_INLINE { return std::cos(v); }); break;
    case UnaryOp::Tan: run([](A v) TS_LAMBDA_INLINE { return std::tan(v); }); break;
    case UnaryOp::Tanh: run([](A v) TS_LAMBDA_INLINE { return m_tanh(v); }); break;
    case UnaryOp::Sigmoid: run([](A v) TS_LAMBDA_INLINE { return m_sigmoid(v); }); break;
    case UnaryOp::Relu: run([](A v) TS_LAMBDA_INLINE { return v < A(0) ? A(0) : v; }); break;  // keeps nan and -0
    case UnaryOp::Gelu: run([](A v) TS_LAMBDA_INLINE { return m_gelu(v); }); break;
    case UnaryOp::GeluTanh:
      run([](A v) TS_LAMBDA_INLINE {
        const A inner = A(0.79788456080286535588) * (v + A(0.044715) * v * v * v);
        return A(0.5) * v * (A(1) + m_tanh(inner));
      });
      break;
    case UnaryOp::Silu: run([](A v) TS_LAMBDA_INLINE { return v * m_sigmoid(v); }); break;
    case UnaryOp::Softplus: {
      const A beta = static_cast<A>(prm.beta), threshold = static_cast<A>(prm.threshold);
      run([beta, threshold](A v) TS_LAMBDA_INLINE { return v * beta > threshold ? v : std::log1p(std::exp(v * beta)) / beta; });
      break;
    }
    case UnaryOp::HardSwish:  // x * clamp(x + 3, 0, 6) / 6; a NaN stays NaN
      run([](A v) TS_LAMBDA_INLINE {
        A r = v + A(3);
        r = r < A(0) ? A(0) : (r > A(6) ? A(6) : r);
        return v * r / A(6);
      });
      break;
    case UnaryOp::Erf: run([](A v) TS_LAMBDA_INLINE { return m_erf(v); }); break;
    case UnaryOp::Floor: run([](A v) TS_LAMBDA_INLINE { return std::floor(v); }); break;
    case UnaryOp::Ceil: run([](A v) TS_LAMBDA_INLINE { return std::ceil(v); }); break;
    case UnaryOp::Round: run([](A v) TS_LAMBDA_INLINE { return std::nearbyint(v); }); break;  // half to even
    case UnaryOp::Trunc: run([](A v) TS_LAMBDA_INLINE { return std::trunc(v); }); break;
    case UnaryOp::Sign: run([](A v) TS_LAMBDA_INLINE { return static_cast<A>((A(0) < v) - (v < A(0))); }); break;
    case UnaryOp::Reciprocal: run([](A v) TS_LAMBDA_INLINE { return A(1) / v; }); break;
    case UnaryOp::NanToNum: {
      const A nan_v = static_cast<A>(prm.nan), pos = static_cast<A>(prm.posinf), neg = static_cast<A>(prm.neginf);
      run([=](A v) TS_LAMBDA_INLINE { return v != v ? nan_v : (v == inf ? pos : (v == -inf ? neg : v)); });
      break;
    }
    default: TS_THROW(DTypeError, "unary kernel: op ", int(op), " not implemented for dtype ", dtype_name(dtype_of_v<T>));
  }
}

template <class T>
void unary_integral(const Tensor& out, const Tensor& x, UnaryOp op) {
  auto run = [&](auto f) { unary_loop<T, T>(out, x, f); };
  switch (op) {
    case UnaryOp::Neg:
      if constexpr (!std::is_same_v<T, bool>) run([](T v) TS_LAMBDA_INLINE { return static_cast<T>(-v); });
      break;
    case UnaryOp::Abs:
      if constexpr (!std::is_same_v<T, bool>) run([](T v) TS_LAMBDA_INLINE { return static_cast<T>(v < T(0) ? -v : v); });
      break;
    case UnaryOp::Relu:
      if constexpr (!std::is_same_v<T, bool>) run([](T v) TS_LAMBDA_INLINE { return v < T(0) ? T(0) : v; });
      break;
    case UnaryOp::Sign:
      if constexpr (std::is_same_v<T, bool>) run([](T v) TS_LAMBDA_INLINE { return v; });
      else run([](T v) TS_LAMBDA_INLINE { return static_cast<T>((T(0) < v) - (v < T(0))); });
      break;
    case UnaryOp::BitwiseNot:
      if constexpr (std::is_same_v<T, bool>) run([](T v) TS_LAMBDA_INLINE { return !v; });
      else run([](T v) TS_LAMBDA_INLINE { return static_cast<T>(~v); });
      break;
    case UnaryOp::Floor: case UnaryOp::Ceil: case UnaryOp::Round: case UnaryOp::Trunc: case UnaryOp::NanToNum:
      run([](T v) TS_LAMBDA_INLINE { return v; });  // integers are their own floor, ceil, ...
      break;
    default: TS_THROW(DTypeError, "unary kernel: op ", int(op), " not implemented for dtype ", dtype_name(dtype_of_v<T>));
  }
}

template <class T>
void unary_predicate(const Tensor& out, const Tensor& x, UnaryOp op) {
  using A = acc_t<T>;
  auto run = [&](auto f) { unary_loop<T, bool>(out, x, [f](T v) TS_LAMBDA_INLINE { return f(static_cast<A>(v)); }); };
  constexpr bool fp = std::is_floating_point_v<A>;
  switch (op) {
    case UnaryOp::LogicalNot: run([](A v) TS_LAMBDA_INLINE { return v == A(0); }); break;
    case UnaryOp::IsNan:
      if constexpr (fp) run([](A v) TS_LAMBDA_INLINE { return v != v; });
      else run([](A) TS_LAMBDA_INLINE { return false; });
      break;
    case UnaryOp::IsInf:
      if constexpr (fp) run([](A v) TS_LAMBDA_INLINE { return std::fabs(v) == std::numeric_limits<A>::infinity(); });
      else run([](A) TS_LAMBDA_INLINE { return false; });
      break;
    case UnaryOp::IsFinite:
      if constexpr (fp) run([](A v) TS_LAMBDA_INLINE { return v - v == A(0); });  // nan and inf give nan
      else run([](A) TS_LAMBDA_INLINE { return true; });
      break;
    default: TS_THROW(DTypeError, "unary kernel: op ", int(op), " is not a predicate");
  }
}

void unary_cpu(const Tensor& out, const Tensor& x, UnaryOp op, const UnaryParams& p) {
  if (out.numel() == 0) return;
  dispatch_dtype(x.dtype(), "unary", [&]<class T>(TypeTag<T>) {
    if (is_predicate(op)) {
      unary_predicate<T>(out, x, op);
    } else if constexpr (std::is_floating_point_v<acc_t<T>>) {
      unary_floating<T>(out, x, op, p);
    } else {
      unary_integral<T>(out, x, op);
    }
  });
}

}  // namespace

void register_unary() { unary_kernel.set(DeviceType::CPU, &unary_cpu); }

}  // namespace tessera::cpu::TS_CPU_ISA
