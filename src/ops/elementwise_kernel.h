// Kernel slots of the elementwise family: unary, binary, ternary (where / lerp / addcmul / addcdiv /
// clamp), softmax, and the allclose test. One slot per shape of kernel; the op is a runtime enum.
//
// Invariants the ops guarantee before calling a slot (so kernels hold no dtype or shape logic):
// - every value input has the compute dtype (the ops cast with cast_to); `where`'s condition is bool;
// - the output has the broadcast shape; its dtype is the compute dtype, or bool for the predicates
//   (comparisons, logical ops, isnan/isinf/isfinite);
// - softmax gets contiguous input and output of one floating dtype.
// Kernels that find bad data (integer division by zero) raise ValueError after their parallel loop.
#pragma once
#include <cstdint>

#include "ops/kernel_slot.h"
#include "tessera/scalar.h"
#include "tessera/tensor.h"

namespace tessera {

enum class UnaryOp : uint8_t {
  Neg, Abs, Exp, Exp2, Log, Log2, Log1p, Expm1, Sqrt, Rsqrt, Sin, Cos, Tan, Tanh, Sigmoid, Relu,
  Gelu, GeluTanh, Silu, Softplus, HardSwish, Erf, Floor, Ceil, Round, Trunc, Sign, Reciprocal,
  BitwiseNot, NanToNum,
  // Predicates: output bool.
  LogicalNot, IsNan, IsInf, IsFinite,
};

struct UnaryParams {
  double beta = 1.0, threshold = 20.0;           // softplus
  double nan = 0.0, posinf = 0.0, neginf = 0.0;  // nan_to_num (already resolved to the dtype's limits)
};

enum class BinaryOp : uint8_t {
  Add, Sub, Mul, Div, DivTrunc, DivFloor, Pow, Maximum, Minimum, Fmod, Remainder, Atan2, LogAddExp,
  BitwiseAnd, BitwiseOr, BitwiseXor, LeftShift, RightShift,
  ThresholdBackward,  // b <= threshold ? 0 : a (a: the gradient, b: relu's input or output)
  // Predicates: output bool.
  Eq, Ne, Lt, Le, Gt, Ge, LogicalAnd, LogicalOr, LogicalXor,
};

inline bool is_predicate(BinaryOp op) { return op >= BinaryOp::Eq; }
inline bool is_predicate(UnaryOp op) { return op >= UnaryOp::LogicalNot; }

struct BinaryParams {
  Scalar alpha = 1;        // add/sub: a + alpha * b
  double threshold = 0.0;  // threshold_backward, converted to the compute dtype by the kernel
};

enum class TernaryOp : uint8_t {
  Where,    // out = a ? b : c   (a is bool)
  Lerp,     // out = lerp(a, b, weight c)
  Addcmul,  // out = a + value * b * c
  Addcdiv,  // out = a + value * b / c
  Clamp,    // out = min(max(a, b), c), bounds used only where has_min / has_max
};

struct TernaryParams {
  Scalar value = 1;                     // addcmul/addcdiv factor; lerp's weight when value_weight
  bool has_min = true, has_max = true;  // clamp
  bool value_weight = false;            // lerp: the weight is `value` (c is unused)
};

// out = op(x)
using UnaryKernelFn = void(const Tensor& out, const Tensor& x, UnaryOp op, const UnaryParams& p);
extern KernelSlot<UnaryKernelFn> unary_kernel;

// out = op(a, b); a and b broadcast to out.
using BinaryKernelFn = void(const Tensor& out, const Tensor& a, const Tensor& b, BinaryOp op, const BinaryParams& p);
extern KernelSlot<BinaryKernelFn> binary_kernel;

using TernaryKernelFn = void(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, TernaryOp op,
                             const TernaryParams& p);
extern KernelSlot<TernaryKernelFn> ternary_kernel;

// x and out contiguous, viewed as (outer, dim_size, inner); softmax (or log_softmax) over the middle.
using SoftmaxKernelFn = void(const Tensor& out, const Tensor& x, int64_t outer, int64_t dim_size, int64_t inner,
                             bool log);
extern KernelSlot<SoftmaxKernelFn> softmax_kernel;

// *result = every |a - b| <= atol + rtol * |b| (PyTorch's isclose), a and b of one dtype and shape.
using AllCloseKernelFn = void(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan,
                              bool* result);
extern KernelSlot<AllCloseKernelFn> allclose_kernel;

}  // namespace tessera
