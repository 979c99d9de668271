// CUDA unary kernels: math functions, rounding, sign, bitwise not, nan_to_num and the predicates
// (isnan, isinf, isfinite, logical_not), with the semantics of the CPU's (kernels/cpu/unary.cpp).
//
// The op layer hands over x in the compute dtype and an output of that dtype (bool for predicates);
// out may be x itself (in place). Each dtype's ops run through launch_elementwise (Note [GPU
// elementwise paths]) with a functor computing in the accumulate type and rounding once on store.
// gelu (both forms), relu and silu have a functor each (no switch in the loop, kEwHotUnroll vectors
// per thread); the other floating ops share one functor per dtype that switches on the uniform op,
// as do the integer ops and the predicates (one vector per thread, so one inlined copy of the switch
// per element of a vector). Ops a dtype does not take raise DTypeError on the host before any launch.
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/elementwise_math.cuh"
#include "ops/elementwise_kernel.h"

namespace tessera::cuda {
namespace {

// ---- hot floating ops --------------------------------------------------------------------------------
template <class T>
struct GeluOp {
  // 40 registers for the 16-bit types (EwMinBlocks; 52 without, 48% achieved occupancy on an H200): their
  // erf does not hide behind the loads otherwise. At 16 blocks (32 registers) ptxas spills 124 bytes.
  static constexpr int kMinBlocksPerSm = sizeof(T) == 2 ? 12 : 1;
  __device__ T operator()(T x) const { return convert<T>(dm::gelu(convert<dacc_t<T>>(x))); }
};
template <class T>
struct GeluTanhOp {
  __device__ T operator()(T x) const { return convert<T>(dm::gelu_tanh(convert<dacc_t<T>>(x))); }
};
template <class T>
struct ReluOp {
  __device__ T operator()(T x) const {
    using A = dacc_t<T>;
    const A v = convert<A>(x);
    return v < A(0) ? convert<T>(A(0)) : x;  // keeps nan and -0
  }
};
template <class T>
struct SiluOp {
  __device__ T operator()(T x) const {
    using A = dacc_t<T>;
    const A v = convert<A>(x);
    return convert<T>(v * dm::sigmoid(v));
  }
};

// ---- the other floating ops ---------------------------------------------------------------------------
template <class A>
__device__ __forceinline__ A unary_floating_math(UnaryOp op, A v, A beta, A threshold, A nan_v, A pos, A neg) {
  switch (op) {
    case UnaryOp::Neg: return -v;
    case UnaryOp::Abs: return dm::fabs(v);
    case UnaryOp::Exp: return dm::exp(v);
    case UnaryOp::Exp2: return dm::exp2(v);
    case UnaryOp::Log: return dm::log(v);
    case UnaryOp::Log2: return dm::log2(v);
    case UnaryOp::Log1p: return dm::log1p(v);
    case UnaryOp::Expm1: return dm::expm1(v);
    case UnaryOp::Sqrt: return dm::sqrt(v);
    case UnaryOp::Rsqrt: return A(1) / dm::sqrt(v);
    case UnaryOp::Sin: return dm::sin(v);
    case UnaryOp::Cos: return dm::cos(v);
    case UnaryOp::Tan: return dm::tan(v);
    case UnaryOp::Tanh: return dm::tanh(v);
    case UnaryOp::Sigmoid: return dm::sigmoid(v);
    case UnaryOp::Relu: return v < A(0) ? A(0) : v;
    case UnaryOp::Gelu: return dm::gelu(v);
    case UnaryOp::GeluTanh: return dm::gelu_tanh(v);
    case UnaryOp::Silu: return v * dm::sigmoid(v);
    case UnaryOp::Softplus: return v * beta > threshold ? v : dm::log1p(dm::exp(v * beta)) / beta;
    case UnaryOp::HardSwish: {  // x * clamp(x + 3, 0, 6) / 6; a NaN stays NaN
      A r = v + A(3);
      r = r < A(0) ? A(0) : (r > A(6) ? A(6) : r);
      return v * r / A(6);
    }
    case UnaryOp::Erf: return dm::erf(v);
    case UnaryOp::Floor: return dm::floor(v);
    case UnaryOp::Ceil: return dm::ceil(v);
    case UnaryOp::Round: return dm::rint(v);
    case UnaryOp::Trunc: return dm::trunc(v);
    case UnaryOp::Sign: return static_cast<A>((A(0) < v) - (v < A(0)));
    case UnaryOp::Reciprocal: return A(1) / v;
    case UnaryOp::NanToNum: return v != v ? nan_v : (v == dm::inf<A>() ? pos : (v == -dm::inf<A>() ? neg : v));
    default: return v;  // not reached: the host refuses the other ops
  }
}

template <class T>
struct UnaryFloatingOp {
  using A = dacc_t<T>;
  UnaryOp op;
  A beta, threshold, nan_v, pos, neg;
  __device__ T operator()(T x) const {
    return convert<T>(unary_floating_math<A>(op, convert<A>(x), beta, threshold, nan_v, pos, neg));
  }
};

bool floating_takes(UnaryOp op) { return !is_predicate(op) && op != UnaryOp::BitwiseNot; }

// ---- integer and bool ops -----------------------------------------------------------------------------
template <class T>
struct UnaryIntegralOp {
  UnaryOp op;
  __device__ T operator()(T v) const {
    if constexpr (std::is_same_v<T, bool>) {
      return op == UnaryOp::BitwiseNot ? !v : v;  // sign, floor, ceil, round, trunc, nan_to_num: identity
    } else {
      switch (op) {
        case UnaryOp::Neg: return static_cast<T>(-v);
        case UnaryOp::Abs: return static_cast<T>(v < T(0) ? -v : v);
        case UnaryOp::Relu: return v < T(0) ? T(0) : v;
        case UnaryOp::Sign: return static_cast<T>((T(0) < v) - (v < T(0)));
        case UnaryOp::BitwiseNot: return static_cast<T>(~v);
        default: return v;  // floor, ceil, round, trunc, nan_to_num: integers are their own
      }
    }
  }
};

bool integral_takes(UnaryOp op, bool is_bool) {
  switch (op) {
    case UnaryOp::Neg: case UnaryOp::Abs: case UnaryOp::Relu: return !is_bool;
    case UnaryOp::Sign: case UnaryOp::BitwiseNot: case UnaryOp::Floor: case UnaryOp::Ceil: case UnaryOp::Round:
    case UnaryOp::Trunc: case UnaryOp::NanToNum:
      return true;
    default: return false;
  }
}

// ---- predicates ----------------------------------------------------------------------------------------
template <class T>
struct UnaryPredicateOp {
  UnaryOp op;
  __device__ bool operator()(T x) const {
    using A = dacc_t<T>;
    const A v = convert<A>(x);
    if constexpr (std::is_floating_point_v<A>) {
      switch (op) {
        case UnaryOp::IsNan: return v != v;
        case UnaryOp::IsInf: return dm::fabs(v) == dm::inf<A>();
        case UnaryOp::IsFinite: return v - v == A(0);  // nan and inf give nan
        default: return v == A(0);                     // LogicalNot
      }
    } else {
      switch (op) {
        case UnaryOp::IsNan: case UnaryOp::IsInf: return false;
        case UnaryOp::IsFinite: return true;
        default: return v == A(0);  // LogicalNot
      }
    }
  }
};

[[noreturn]] void unsupported(UnaryOp op, DType t) {
  TS_THROW(DTypeError, "unary kernel: op ", int(op), " not implemented for dtype ", dtype_name(t));
}

void unary_cuda(const Tensor& out, const Tensor& x, UnaryOp op, const UnaryParams& p) {
  if (out.numel() == 0) return;
  CurrentDevice guard(out.device().index());
  const ElementwiseIter it(out, {&x});
  const cudaStream_t stream = stream_of(out);
  dispatch_device_dtype(x.dtype(), "unary", [&]<class T>(TypeTag<T>) {
    if (is_predicate(op)) {
      TS_CHECK(op == UnaryOp::LogicalNot || op == UnaryOp::IsNan || op == UnaryOp::IsInf || op == UnaryOp::IsFinite,
               DTypeError, "unary kernel: op ", int(op), " is not a predicate");
      launch_elementwise<1, bool, T>(it, UnaryPredicateOp<T>{op}, stream, "unary");
      return;
    }
    if constexpr (is_floating_v<T>) {
      using A = dacc_t<T>;
      switch (op) {
        case UnaryOp::Gelu: launch_elementwise<kEwHotUnroll, T, T>(it, GeluOp<T>{}, stream, "gelu"); return;
        case UnaryOp::GeluTanh: launch_elementwise<kEwHotUnroll, T, T>(it, GeluTanhOp<T>{}, stream, "gelu"); return;
        case UnaryOp::Relu: launch_elementwise<kEwHotUnroll, T, T>(it, ReluOp<T>{}, stream, "relu"); return;
        case UnaryOp::Silu: launch_elementwise<kEwHotUnroll, T, T>(it, SiluOp<T>{}, stream, "silu"); return;
        default: break;
      }
      if (!floating_takes(op)) unsupported(op, x.dtype());
      const UnaryFloatingOp<T> f{op,
                                 static_cast<A>(p.beta),
                                 static_cast<A>(p.threshold),
                                 static_cast<A>(p.nan),
                                 static_cast<A>(p.posinf),
                                 static_cast<A>(p.neginf)};
      launch_elementwise<1, T, T>(it, f, stream, "unary");
    } else {
      if (!integral_takes(op, std::is_same_v<T, bool>)) unsupported(op, x.dtype());
      launch_elementwise<1, T, T>(it, UnaryIntegralOp<T>{op}, stream, "unary");
    }
  });
}

}  // namespace

void register_unary_cuda() { unary_kernel.set(DeviceType::CUDA, &unary_cuda); }

}  // namespace tessera::cuda
