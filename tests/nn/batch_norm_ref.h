// The float64 reference of batch normalization (ops/batch_norm_kernel.h's formulas, computed on the
// host by direct loops): forward in training (batch statistics, PyTorch's running-stat update with the
// unbiased variance) and evaluation, and the backward of both. Shared by the op's tests and the oneDNN
// comparison (tests/kernels/test_onednn_batch_norm.cpp).
#pragma once
#include <cmath>
#include <vector>

#include "tessera/tessera.h"

namespace batch_norm_ref {

namespace ts = tessera;
using ts::Tensor;

struct Ref {
  std::vector<double> y, mean, invstd, rm, rv, dx, dw, db;
};

// (N, C, L) view sizes of x.
inline void ncl(const Tensor& x, int64_t& n, int64_t& c, int64_t& l) {
  n = x.size(0);
  c = x.size(1);
  l = 1;
  for (int64_t d = 2; d < x.dim(); ++d) l *= x.size(d);
}

inline std::vector<double> values(const Tensor& t) { return t.to(ts::kFloat64).contiguous().tolist<double>(); }

// The float64 reference of forward (and backward for grad g, if defined). w, b, rm, rv may be undefined.
inline Ref reference(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& rm, const Tensor& rv,
                     bool training, double momentum, double eps, const Tensor& g = Tensor()) {
  int64_t n, c, l;
  ncl(x, n, c, l);
  const std::vector<double> xv = values(x);
  const std::vector<double> gv = g.defined() ? values(g) : std::vector<double>();
  const std::vector<double> wv = w.defined() ? values(w) : std::vector<double>(size_t(c), 1.0);
  const std::vector<double> bv = b.defined() ? values(b) : std::vector<double>(size_t(c), 0.0);
  Ref r;
  r.rm = rm.defined() ? values(rm) : std::vector<double>();
  r.rv = rv.defined() ? values(rv) : std::vector<double>();
  r.y.resize(xv.size());
  r.dx.resize(gv.size());
  const double m = double(n * l);
  auto at = [&](int64_t i, int64_t ch, int64_t j) { return (i * c + ch) * l + j; };
  for (int64_t ch = 0; ch < c; ++ch) {
    double mu, is;
    if (training) {
      double s = 0, sq = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < l; ++j) s += xv[at(i, ch, j)];
      mu = s / m;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < l; ++j) sq += (xv[at(i, ch, j)] - mu) * (xv[at(i, ch, j)] - mu);
      is = 1.0 / std::sqrt(sq / m + eps);
      r.mean.push_back(mu);
      r.invstd.push_back(is);
      if (rm.defined()) {
        r.rm[ch] = (1 - momentum) * r.rm[ch] + momentum * mu;
        r.rv[ch] = (1 - momentum) * r.rv[ch] + momentum * sq / (m - 1);
      }
    } else {
      mu = r.rm[ch];
      is = 1.0 / std::sqrt(r.rv[ch] + eps);
    }
    double sg = 0, sgx = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < l; ++j) {
        const int64_t k = at(i, ch, j);
        r.y[k] = (xv[k] - mu) * is * wv[ch] + bv[ch];
        if (g.defined()) {
          sg += gv[k];
          sgx += gv[k] * (xv[k] - mu) * is;
        }
      }
    if (!g.defined()) continue;
    r.db.push_back(sg);
    r.dw.push_back(sgx);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < l; ++j) {
        const int64_t k = at(i, ch, j);
        const double xhat = (xv[k] - mu) * is;
        r.dx[k] = training ? wv[ch] * is * (gv[k] - sg / m - xhat * sgx / m) : wv[ch] * is * gv[k];
      }
  }
  return r;
}

inline Tensor f64(const std::vector<double>& v, const ts::Shape& s) { return ts::tensor(v, s, ts::kFloat64); }

}  // namespace batch_norm_ref
