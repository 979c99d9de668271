// bilinear (nn::functional::bilinear), an op of the table: y = x1^T W x2 + b as two matmuls (PyTorch's
// aten::bilinear is a composition too). Autocast's Promote policy casts mixed float inputs first.
#include "ops/autocast_hook.h"
#include "ops/nn_functional_ops.h"
#include "ops/op_scope.h"
#include "tessera/functions.h"

namespace tessera::op {

Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const std::optional<Tensor>& bias) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::bilinear, {&x1, &x2, &weight, bias ? &*bias : nullptr}); c) return bilinear(c[0], c[1], c[2], c.opt(3));
  OpScope scope(OpId::bilinear, {&x1, &x2, &weight, bias ? &*bias : nullptr});
  const char* op = op_name(OpId::bilinear);
  TS_CHECK(x1.defined() && x2.defined() && weight.defined(), ValueError, op, ": got an undefined tensor");
  TS_CHECK(weight.dim() == 3, ShapeError, op, ": weight must be 3-D (out, in1, in2), got shape ", weight.sizes());
  TS_CHECK(x1.dim() >= 1 && x2.dim() == x1.dim(), ShapeError, op, ": input1 and input2 must have the same number of "
           "dims (at least 1), got ", x1.sizes(), " and ", x2.sizes());
  TS_CHECK(Shape(x1.sizes().begin(), x1.sizes().end() - 1) == Shape(x2.sizes().begin(), x2.sizes().end() - 1),
           ShapeError, op, ": input1 and input2 must have the same batch dims, got ", x1.sizes(), " and ", x2.sizes());
  const int64_t out = weight.size(0), in1 = weight.size(1), in2 = weight.size(2);
  TS_CHECK(x1.size(-1) == in1, ShapeError, op, ": input1's last dim (", x1.size(-1), ") must match weight.size(1) (",
           in1, ")");
  TS_CHECK(x2.size(-1) == in2, ShapeError, op, ": input2's last dim (", x2.size(-1), ") must match weight.size(2) (",
           in2, ")");
  Shape batch(x1.sizes().begin(), x1.sizes().end() - 1);
  const int64_t rows = numel_of(batch);
  Tensor a = x1.reshape({rows, in1});  // (B, in1)
  Tensor b = x2.reshape({rows, in2});  // (B, in2)
  // (B, in1) @ (in1, out * in2) -> (B, out, in2), then contract in2 with x2.
  Tensor w = weight.permute({1, 0, 2}).reshape({in1, out * in2});
  Tensor t = matmul(a, w).view({rows, out, in2});
  Tensor y = matmul(t, b.unsqueeze(-1)).squeeze(-1);  // (B, out)
  if (bias && bias->defined()) y = y + *bias;
  batch.push_back(out);
  return y.reshape(batch);
}

}  // namespace tessera::op
