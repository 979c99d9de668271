// PyTorch's result_type: the dtype an op computes in, from its tensor and number operands.
// Dimensioned tensors outrank zero-dim tensors, which outrank numbers, unless a lower-ranked operand
// is of a higher category (bool < integral < floating): `int32 tensor + 2.5` is float32,
// `float16 tensor + 2.5` stays float16, `int32 tensor + 2` stays int32.
#pragma once
#include <optional>

#include "tessera/scalar.h"
#include "tessera/tensor.h"

namespace tessera {

class ResultType {
 public:
  ResultType& add(const Tensor& t);
  ResultType& add(const Scalar& s);
  DType result() const;

 private:
  std::optional<DType> dim_, zero_dim_, wrapped_;
};

DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const Tensor& a, const Scalar& b);

}  // namespace tessera
