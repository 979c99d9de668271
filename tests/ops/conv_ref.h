// Float64 references for the convolution and pooling tests: direct (loop) convolution, transposed
// convolution and pooling over host vectors, written independently of the kernels (no im2col, no
// GEMM), plus the deterministic inputs shared with tests/ops/conv_reference.py.
#pragma once
#include <cmath>
#include <limits>
#include <vector>

#include "common/test_util.h"

namespace conv_ref {

namespace ts = tessera;

// Element i of a tensor with salt s is 2 * sin(0.731 * i + s), as conv_reference.py builds them.
inline ts::Tensor ref_values(const ts::Shape& shape, double salt) {
  std::vector<double> v(ts::numel_of(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 2.0 * std::sin(0.731 * double(i) + salt);
  return ts::tensor(v, shape, ts::kFloat64);
}

inline ts::Tensor from(const std::vector<double>& v, const ts::Shape& shape) {
  return ts::tensor(v, shape, ts::kFloat64);
}

struct Conv {
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, groups = 1;
};

// conv2d by its definition. x (N, C, H, W), w (Co, C/G, KH, KW), bias (Co) or empty.
inline ts::Tensor conv2d(const ts::Tensor& x, const ts::Tensor& w, const ts::Tensor& bias, const Conv& c) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Co = w.size(0), Cg = w.size(1), KH = w.size(2), KW = w.size(3);
  const int64_t OH = (H + 2 * c.ph - c.dh * (KH - 1) - 1) / c.sh + 1;
  const int64_t OW = (W + 2 * c.pw - c.dw * (KW - 1) - 1) / c.sw + 1;
  const int64_t Cog = Co / c.groups;
  std::vector<double> xv = x.tolist<double>(), wv = w.tolist<double>(), out(N * Co * OH * OW);
  std::vector<double> bv = bias.defined() ? bias.tolist<double>() : std::vector<double>(Co, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < Co; ++co) {
      const int64_t grp = co / Cog;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = bv[co];
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * c.sh - c.ph + kh * c.dh, iw = ow * c.sw - c.pw + kw * c.dw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += xv[((n * C + grp * Cg + ci) * H + ih) * W + iw] * wv[((co * Cg + ci) * KH + kh) * KW + kw];
              }
          out[((n * Co + co) * OH + oh) * OW + ow] = s;
        }
    }
  return from(out, {N, Co, OH, OW});
}

// conv_transpose2d by scattering every input element through the kernel.
// x (N, Ci, H, W), w (Ci, Co/G, KH, KW).
inline ts::Tensor conv_transpose2d(const ts::Tensor& x, const ts::Tensor& w, const ts::Tensor& bias, const Conv& c,
                                   int64_t oph, int64_t opw) {
  const int64_t N = x.size(0), Ci = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Cog = w.size(1), KH = w.size(2), KW = w.size(3), Co = Cog * c.groups, Cig = Ci / c.groups;
  const int64_t OH = (H - 1) * c.sh - 2 * c.ph + c.dh * (KH - 1) + oph + 1;
  const int64_t OW = (W - 1) * c.sw - 2 * c.pw + c.dw * (KW - 1) + opw + 1;
  std::vector<double> xv = x.tolist<double>(), wv = w.tolist<double>(), out(N * Co * OH * OW, 0.0);
  std::vector<double> bv = bias.defined() ? bias.tolist<double>() : std::vector<double>(Co, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ci = 0; ci < Ci; ++ci) {
      const int64_t grp = ci / Cig;
      for (int64_t ih = 0; ih < H; ++ih)
        for (int64_t iw = 0; iw < W; ++iw) {
          const double v = xv[((n * Ci + ci) * H + ih) * W + iw];
          for (int64_t co = 0; co < Cog; ++co)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t oh = ih * c.sh - c.ph + kh * c.dh, ow = iw * c.sw - c.pw + kw * c.dw;
                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                out[((n * Co + grp * Cog + co) * OH + oh) * OW + ow] += v * wv[((ci * Cog + co) * KH + kh) * KW + kw];
              }
        }
    }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < Co; ++co)
      for (int64_t i = 0; i < OH * OW; ++i) out[(n * Co + co) * OH * OW + i] += bv[co];
  return from(out, {N, Co, OH, OW});
}

struct Pool {
  int64_t kh, kw, sh, sw, ph = 0, pw = 0, dh = 1, dw = 1;
  bool ceil = false, count_include_pad = true;
};

inline int64_t pooled(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, bool ceil) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;  // span >= 0 in every test
  if (ceil && (out - 1) * s >= in + p) --out;
  return out;
}

// Max pooling by definition: the first maximum in window order; NaN wins. Returns {out, idx}.
inline std::pair<ts::Tensor, ts::Tensor> max_pool2d(const ts::Tensor& x, const Pool& p) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OH = pooled(H, p.kh, p.ph, p.sh, p.dh, p.ceil), OW = pooled(W, p.kw, p.pw, p.sw, p.dw, p.ceil);
  std::vector<double> xv = x.tolist<double>(), out(N * C * OH * OW), idx(out.size());
  for (int64_t pl = 0; pl < N * C; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double m = -std::numeric_limits<double>::infinity();
        int64_t best = -1;
        for (int64_t kh = 0; kh < p.kh; ++kh)
          for (int64_t kw = 0; kw < p.kw; ++kw) {
            const int64_t ih = oh * p.sh - p.ph + kh * p.dh, iw = ow * p.sw - p.pw + kw * p.dw;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            const double v = xv[pl * H * W + ih * W + iw];
            if (best < 0 || v > m || std::isnan(v)) {  // as PyTorch: a later NaN replaces an earlier one
              m = v;
              best = ih * W + iw;
            }
          }
        out[(pl * OH + oh) * OW + ow] = m;
        idx[(pl * OH + oh) * OW + ow] = double(best);
      }
  return {from(out, {N, C, OH, OW}), from(idx, {N, C, OH, OW})};
}

// Average pooling by definition: the divisor counts the window clipped to the padded input
// (count_include_pad) or the in-bounds taps.
inline ts::Tensor avg_pool2d(const ts::Tensor& x, const Pool& p) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OH = pooled(H, p.kh, p.ph, p.sh, 1, p.ceil), OW = pooled(W, p.kw, p.pw, p.sw, 1, p.ceil);
  std::vector<double> xv = x.tolist<double>(), out(N * C * OH * OW);
  for (int64_t pl = 0; pl < N * C; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double s = 0;
        int64_t inside = 0, padded = 0;
        for (int64_t kh = 0; kh < p.kh; ++kh)
          for (int64_t kw = 0; kw < p.kw; ++kw) {
            const int64_t ih = oh * p.sh - p.ph + kh, iw = ow * p.sw - p.pw + kw;
            if (ih < H + p.ph && iw < W + p.pw) ++padded;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            s += xv[pl * H * W + ih * W + iw];
            ++inside;
          }
        const int64_t div = p.count_include_pad ? padded : inside;
        out[(pl * OH + oh) * OW + ow] = inside == 0 ? 0.0 : s / double(div);
      }
  return from(out, {N, C, OH, OW});
}

inline ts::Tensor adaptive_avg_pool2d(const ts::Tensor& x, int64_t OH, int64_t OW) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  std::vector<double> xv = x.tolist<double>(), out(N * C * OH * OW);
  for (int64_t pl = 0; pl < N * C; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t h0 = int64_t(std::floor(double(oh * H) / OH)), h1 = int64_t(std::ceil(double((oh + 1) * H) / OH));
        const int64_t w0 = int64_t(std::floor(double(ow * W) / OW)), w1 = int64_t(std::ceil(double((ow + 1) * W) / OW));
        double s = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) s += xv[pl * H * W + ih * W + iw];
        out[(pl * OH + oh) * OW + ow] = s / double((h1 - h0) * (w1 - w0));
      }
  return from(out, {N, C, OH, OW});
}

}  // namespace conv_ref
