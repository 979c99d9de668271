// dropout (nn::functional::dropout), an op of the table: inverted dropout as a Bernoulli mask times
// the input, scaled by 1 / (1 - p) (PyTorch's formula); identity when not training or p = 0.
#include "ops/nn_functional_ops.h"
#include "ops/op_scope.h"
#include "tessera/functions.h"

namespace tessera::op {

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  OpScope scope(OpId::dropout, {&x});
  TS_CHECK(p >= 0 && p <= 1, ValueError, "dropout: dropout probability has to be between 0 and 1, but got ", p);
  TS_CHECK(x.defined(), ValueError, "dropout: got an undefined input");
  if (!training || p == 0) return x;
  TS_CHECK(x.is_floating_point(), DTypeError, "dropout: expected a floating-point input, got ", dtype_name(x.dtype()));
  if (p == 1) return x * zeros_like(x);  // keeps the graph (and NaN/Inf propagation) of x * 0
  // Inverted dropout: the kept elements are scaled now, so evaluation needs no rescaling.
  // The keep probability as x's dtype holds it (what bernoulli(full_like(x, 1 - p)) would compare
  // against), drawn with the scalar-p kernel: no probability tensor to validate, so no device sync.
  const double keep_p = full({}, 1.0 - p, TensorOptions(x.dtype())).item<double>();
  Tensor keep = empty_like(x).bernoulli_(keep_p, gen);
  return x * keep * (1.0 / (1.0 - p));
}

}  // namespace tessera::op
