// Host-side helpers for the indexing tests: coordinates <-> row-major offsets, a float64 reference
// tensor from host values, deterministic index values, and a reference of NumPy/PyTorch advanced
// indexing written directly from the rules (not from the library's plan).
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/test_util.h"

namespace tessera::testing {

inline std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> c(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    c[i] = flat % shape[i];
    flat /= shape[i];
  }
  return c;
}

inline int64_t ravel(const std::vector<int64_t>& c, const Shape& shape) {
  int64_t flat = 0;
  for (size_t i = 0; i < shape.size(); ++i) flat = flat * shape[i] + c[i];
  return flat;
}

// float64 tensor of `shape` from row-major host values (0-dim when shape is {}).
inline Tensor ref_tensor(const std::vector<double>& v, const Shape& shape) {
  return tensor(v, {static_cast<int64_t>(v.size())}, TensorOptions(kFloat64)).reshape(shape);
}

inline Tensor int_tensor(const std::vector<int64_t>& v, const Shape& shape = {}, DType d = kInt64) {
  Shape s = shape.empty() && v.size() != 1 ? Shape{static_cast<int64_t>(v.size())} : shape;
  return tensor(v, {static_cast<int64_t>(v.size())}).reshape(s).to(d);
}

// Deterministic pseudo-random integers in [lo, hi).
inline std::vector<int64_t> rand_ints(int64_t n, int64_t lo, int64_t hi, uint64_t seed = 7) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (auto& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = lo + static_cast<int64_t>((s >> 33) % static_cast<uint64_t>(hi - lo));
  }
  return v;
}

// Integer-valued data in `dtype`: sums of a few are exact in every dtype, so accumulating ops can be
// compared exactly (bool: nonzero values become true; uint8: non-negative so sums do not wrap).
inline Tensor int_data(const Shape& shape, DType dtype, uint64_t seed = 3) {
  return test_data(shape, kInt64, seed, dtype == kUInt8 ? 0 : -5, 5).to(dtype);
}

// One entry of an advanced index on the host: a slice, or integer values of some shape.
struct HostIndex {
  bool slice = true;
  std::vector<int64_t> vals;
  Shape shape;
};

inline HostIndex host_index(const Tensor& t) { return {false, t.tolist<int64_t>(), t.sizes()}; }

// A k-dim boolean mask as k 1-D coordinate indices (row-major order of its true elements).
inline std::vector<HostIndex> host_mask(const Tensor& mask) {
  std::vector<double> m = mask.tolist<double>();
  std::vector<HostIndex> out(mask.dim(), HostIndex{false, {}, {}});
  for (int64_t i = 0; i < static_cast<int64_t>(m.size()); ++i) {
    if (m[i] == 0) continue;
    auto c = unravel(i, mask.sizes());
    for (int64_t j = 0; j < mask.dim(); ++j) out[j].vals.push_back(c[j]);
  }
  for (auto& h : out) h.shape = {static_cast<int64_t>(h.vals.size())};
  return out;
}

// Where each result element of x[idx...] comes from: the row-major offsets into x, and the result shape.
struct HostIndexMap {
  Shape shape;
  std::vector<int64_t> src;  // per result element (row-major), the row-major offset into x
};

inline HostIndexMap host_index_map(const Shape& xshape, std::vector<HostIndex> idx) {
  const int64_t nd = static_cast<int64_t>(xshape.size());
  while (static_cast<int64_t>(idx.size()) < nd) idx.push_back(HostIndex{});
  Shape B;
  std::vector<int64_t> adv;
  for (int64_t d = 0; d < nd; ++d) {
    if (idx[d].slice) continue;
    adv.push_back(d);
    const Shape& s = idx[d].shape;
    size_t n = std::max(B.size(), s.size());
    Shape nb(n);
    for (size_t i = 0; i < n; ++i) {
      int64_t a = i < n - B.size() ? 1 : B[i - (n - B.size())];
      int64_t b = i < n - s.size() ? 1 : s[i - (n - s.size())];
      nb[i] = a == 1 ? b : a;
    }
    B = nb;
  }
  const bool adjacent = adv.empty() || adv.back() - adv.front() + 1 == static_cast<int64_t>(adv.size());
  const int64_t first = adjacent && !adv.empty() ? adv.front() : 0;
  // Result dims: [slice dims before `first`] + B + [other slice dims].
  std::vector<int64_t> before, after;
  for (int64_t d = 0; d < nd; ++d) {
    if (!idx[d].slice) continue;
    (d < first ? before : after).push_back(d);
  }
  HostIndexMap m;
  for (int64_t d : before) m.shape.push_back(xshape[d]);
  m.shape.insert(m.shape.end(), B.begin(), B.end());
  for (int64_t d : after) m.shape.push_back(xshape[d]);
  int64_t n = 1;
  for (int64_t s : m.shape) n *= s;
  for (int64_t r = 0; r < n; ++r) {
    auto rc = unravel(r, m.shape);
    std::vector<int64_t> xc(nd);
    size_t k = 0;
    for (int64_t d : before) xc[d] = rc[k++];
    std::vector<int64_t> bc(rc.begin() + k, rc.begin() + k + B.size());
    k += B.size();
    for (int64_t d : after) xc[d] = rc[k++];
    for (int64_t d : adv) {
      const Shape& s = idx[d].shape;
      std::vector<int64_t> ic(s.size());
      for (size_t i = 0; i < s.size(); ++i) ic[i] = s[i] == 1 ? 0 : bc[i + (B.size() - s.size())];
      int64_t v = idx[d].vals[ravel(ic, s)];
      xc[d] = v < 0 ? v + xshape[d] : v;
    }
    m.src.push_back(ravel(xc, xshape));
  }
  return m;
}

}  // namespace tessera::testing
