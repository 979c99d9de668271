// Sizes, strides and dimension lists.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <vector>

namespace tessera {

using Shape = std::vector<int64_t>;  // sizes or strides, outermost first

// A set of dimensions for a reduction: one dim (`x.sum(1)`), a list (`x.sum({0, 2})`).
struct Dims {
  std::vector<int64_t> dims;
  Dims(int64_t d) : dims{d} {}                       // NOLINT
  Dims(int d) : dims{d} {}                           // NOLINT
  Dims(std::initializer_list<int64_t> d) : dims(d) {}  // NOLINT
  Dims(std::vector<int64_t> d) : dims(std::move(d)) {}  // NOLINT
};

int64_t numel_of(const Shape& sizes);  // raises ValueError on overflow past int64
// Row-major strides for `sizes`.
Shape contiguous_strides(const Shape& sizes);
// Wraps a possibly negative dim into [0, ndim); raises IndexError naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
std::ostream& operator<<(std::ostream& os, const Shape& s);  // [2, 3]

}  // namespace tessera
