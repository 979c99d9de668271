// Shape helpers: element counts with overflow checks, row-major strides, dim wrapping.
#include "tessera/shape.h"

#include "tessera/error.h"

namespace tessera {

int64_t numel_of(const Shape& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    TS_CHECK(s >= 0, ShapeError, "negative size ", s, " in shape ", sizes);
    TS_CHECK(!__builtin_mul_overflow(n, s, &n), ValueError, "numel of shape ", sizes,
             " overflows int64 (at most 2^63 - 1 elements)");
  }
  return n;
}

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= sizes[i] > 1 ? sizes[i] : 1;
  }
  return strides;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = ndim > 0 ? ndim : 1;  // a 0-dim tensor accepts dim 0 and -1, as in PyTorch
  TS_CHECK(dim >= -n && dim < n, IndexError, op, ": dimension out of range (expected to be in range of [",
           -n, ", ", n - 1, "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

std::ostream& operator<<(std::ostream& os, const Shape& s) {
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  return os << ']';
}

}  // namespace tessera
