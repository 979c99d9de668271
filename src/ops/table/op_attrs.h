// The attributes of an op call (DESIGN.md "The op table"): the non-tensor arguments that its derivative
// (and, later, a compiled graph's node) needs, and tensors it needs that take no gradient (indices,
// masks, saved statistics).
//
// Note [Typed attributes]: a family whose arguments have names gets a struct of its own (ConvAttrs,
// PoolAttrs), stored in OpAttrs::typed and read by name (`c.attrs.as<ConvAttrs>().stride`); the
// table's attrs column says which struct each op records, and the autograd stage checks it on every
// recorded call. The other families still use the positional fields (ints, scalars, str, flag), whose
// meaning each derivative file states at its top. ConvAttrs, PoolAttrs, ReduceAttrs, NormAttrs,
// BatchNormAttrs and IndexAttrs exist so far. Every attribute set is comparable, hashable and
// printable: the compiler's cache keys and graph dumps need all three. Tensors take part by their
// metadata (sizes, dtype, device), not their values.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "tessera/error.h"
#include "tessera/scalar.h"
#include "tessera/tensor.h"

namespace tessera {

// Two spatial values (height, width), as the public API's IntPair, comparable.
struct HW {
  int64_t h = 0, w = 0;
  auto operator<=>(const HW&) const = default;
};

// conv2d, conv_transpose2d (output_padding), conv2d_backward_weight (kernel: the weight's KH, KW).
struct ConvAttrs {
  HW stride{1, 1}, padding{0, 0}, dilation{1, 1}, output_padding{0, 0};
  int64_t groups = 1;
  HW kernel{0, 0};
  auto operator<=>(const ConvAttrs&) const = default;
};

// max_pool2d_with_indices and its backward (dilation), avg_pool2d and its backward (count_include_pad).
struct PoolAttrs {
  HW kernel{1, 1}, stride{1, 1}, padding{0, 0}, dilation{1, 1};
  bool ceil_mode = false;
  bool count_include_pad = true;
  auto operator<=>(const PoolAttrs&) const = default;
};

// The reductions and scans: dims as the caller gave them (empty: every dim; negative allowed; a scan's
// one dim), keepdim, and the one number some of them take (var / std / var_mean: correction; norm: p).
struct ReduceAttrs {
  std::vector<int64_t> dims;
  bool keepdim = false;
  double correction = 0;
  double p = 2;
  bool operator==(const ReduceAttrs&) const = default;
};

// native_layer_norm, native_rms_norm, native_add_layer_norm: the normalized trailing shape and eps
// (the statistics the forward computed go in OpAttrs::tensors).
struct NormAttrs {
  std::vector<int64_t> normalized_shape;
  double eps = 1e-5;
  bool operator==(const NormAttrs&) const = default;
};

// native_batch_norm: batch statistics (training) or running ones, and eps (the saved statistics and
// running buffers go in OpAttrs::tensors).
struct BatchNormAttrs {
  bool training = false;
  double eps = 1e-5;
  bool operator==(const BatchNormAttrs&) const = default;
};

// The indexing and selection ops: the wrapped dim (index_select, gather, scatter, scatter_add,
// index_add, sort, topk), index_add's alpha, index_put's accumulate, embedding's padding_idx (wrapped;
// -1: none). Index tensors travel in OpAttrs::tensors.
struct IndexAttrs {
  int64_t dim = 0;
  double alpha = 1;
  bool accumulate = false;
  int64_t padding_idx = -1;
  bool operator==(const IndexAttrs&) const = default;
};

// The op table's attrs column: which struct an op's calls carry (Positional: the generic fields).
enum class AttrsKind : uint8_t { Positional, Conv, Pool, Reduce, Norm, BatchNorm, Index };
using TypedAttrs =
    std::variant<std::monostate, ConvAttrs, PoolAttrs, ReduceAttrs, NormAttrs, BatchNormAttrs, IndexAttrs>;

struct OpAttrs {
  std::vector<Scalar> scalars;
  std::vector<int64_t> ints;
  std::vector<Tensor> tensors;
  std::string str;
  bool flag = false;
  TypedAttrs typed;

  AttrsKind kind() const { return static_cast<AttrsKind>(typed.index()); }
  // The typed attributes; a programming error (ValueError naming both) when the call carries others.
  template <class T>
  const T& as() const {
    const T* p = std::get_if<T>(&typed);
    TS_CHECK(p != nullptr, ValueError, "OpAttrs: expected ", attrs_kind_name_of<T>(), " attributes, the call carries ",
             attrs_kind_name(kind()));
    return *p;
  }

  static const char* attrs_kind_name(AttrsKind k);
  template <class T>
  static const char* attrs_kind_name_of() {
    return attrs_kind_name(static_cast<AttrsKind>(TypedAttrs(T{}).index()));
  }
};

bool operator==(const OpAttrs& a, const OpAttrs& b);
size_t hash_value(const OpAttrs& a);
size_t hash_value(const ConvAttrs& a);
size_t hash_value(const PoolAttrs& a);
size_t hash_value(const ReduceAttrs& a);
size_t hash_value(const NormAttrs& a);
size_t hash_value(const BatchNormAttrs& a);
size_t hash_value(const IndexAttrs& a);
// "ConvAttrs(stride=(2, 2), padding=(3, 3), dilation=(1, 1), output_padding=(0, 0), groups=1, kernel=(0, 0))";
// an OpAttrs prints its set fields only, tensors as their metadata: "ints=[0, 1], flag=true, tensors=[int64(4, 5)]".
std::string to_string(const ConvAttrs& a);
std::string to_string(const PoolAttrs& a);
std::string to_string(const ReduceAttrs& a);
std::string to_string(const NormAttrs& a);
std::string to_string(const BatchNormAttrs& a);
std::string to_string(const IndexAttrs& a);
std::string to_string(const OpAttrs& a);

}  // namespace tessera
