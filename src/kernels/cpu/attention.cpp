// CPU flash attention, forward and backward (ops/attention_kernel.h, Note [Flash attention layout]):
// the reference semantics of the GPU kernels, computed one query row at a time so that no (L, S)
// matrix exists (one row of S scores per thread). Accumulation in acc_t<T> (float for the 16-bit
// floats and float32, double for float64); inputs are read through their strides (last dim
// contiguous), outputs are written through theirs.
//
// Forward: rows (b, h, i) run in parallel (OpenMP, static schedule); per row the scores of the keys
// it sees, their max m, l = sum exp(s - m), out = sum exp(s - m) v / l, lse = m + log(l).
// Backward: heads (b, h) run in parallel; a head's rows run in order, each adding its terms into the
// head's float dk / dv rows, so the result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "ops/attention_kernel.h"
#include "tensor/dispatch_dtype.h"

namespace tessera::cpu {
namespace {

// A (B, H, N, D) tensor read through its strides (last dim contiguous).
template <class T>
struct View {
  T* base;
  int64_t sb, sh, sn;
  View(const Tensor& t) : base(static_cast<T*>(t.data_ptr())), sb(t.stride(0)), sh(t.stride(1)), sn(t.stride(2)) {}
  T* row(int64_t b, int64_t h, int64_t i) const { return base + b * sb + h * sh + i * sn; }
};

// Keys that query i sees: [0, limit).
int64_t key_limit(const AttentionParams& p, int64_t i) { return p.causal ? std::min(p.kv_len, i + 1) : p.kv_len; }

template <class T, class A>
A dot(const A* x, const T* y, int64_t n) {
  A s = 0;
  for (int64_t d = 0; d < n; ++d) s += x[d] * static_cast<A>(y[d]);
  return s;
}

template <class T>
void forward(const Tensor& out_t, const Tensor& lse_t, const Tensor& q_t, const Tensor& k_t, const Tensor& v_t,
             const AttentionParams& p) {
  using A = acc_t<T>;
  const View<T> q(q_t), k(k_t), v(v_t), out(out_t);
  A* lse = static_cast<A*>(lse_t.data_ptr());
  const int64_t D = p.head_dim, L = p.q_len, rows = p.batch * p.heads * L;
  const A scale = static_cast<A>(p.scale);
#pragma omp parallel if (rows > 1 && rows * p.kv_len * D > 32768)
  {
    std::vector<A> s(p.kv_len), qr(D), acc(D);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t bh = r / L, i = r % L, b = bh / p.heads, h = bh % p.heads;
      const T* qi = q.row(b, h, i);
      for (int64_t d = 0; d < D; ++d) qr[d] = static_cast<A>(qi[d]);
      const int64_t n = key_limit(p, i);
      A m = -std::numeric_limits<A>::infinity();
      for (int64_t j = 0; j < n; ++j) {
        s[j] = scale * dot(qr.data(), k.row(b, h, j), D);
        m = std::max(m, s[j]);
      }
      std::fill(acc.begin(), acc.end(), A(0));
      A l = 0;
      for (int64_t j = 0; j < n; ++j) {
        const A e = std::exp(s[j] - m);
        l += e;
        const T* vj = v.row(b, h, j);
        for (int64_t d = 0; d < D; ++d) acc[d] += e * static_cast<A>(vj[d]);
      }
      T* o = out.row(b, h, i);
      for (int64_t d = 0; d < D; ++d) o[d] = static_cast<T>(acc[d] / l);
      lse[r] = m + std::log(l);
    }
  }
}

template <class T>
void backward(const Tensor& dq_t, const Tensor& dk_t, const Tensor& dv_t, const Tensor& do_t, const Tensor& q_t,
              const Tensor& k_t, const Tensor& v_t, const Tensor& out_t, const Tensor& lse_t,
              const AttentionParams& p) {
  using A = acc_t<T>;
  const View<T> q(q_t), k(k_t), v(v_t), o(out_t), dout(do_t), dq(dq_t), dk(dk_t), dv(dv_t);
  const A* lse = static_cast<const A*>(lse_t.data_ptr());
  const int64_t D = p.head_dim, L = p.q_len, S = p.kv_len, heads = p.batch * p.heads;
  const A scale = static_cast<A>(p.scale);
#pragma omp parallel if (heads > 1 && L * S * D > 16384)
  {
    std::vector<A> pr(S), dkh(S * D), dvh(S * D), qr(D), dor(D), dqr(D);
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < heads; ++bh) {
      const int64_t b = bh / p.heads, h = bh % p.heads;
      std::fill(dkh.begin(), dkh.end(), A(0));
      std::fill(dvh.begin(), dvh.end(), A(0));
      for (int64_t i = 0; i < L; ++i) {
        const T* qi = q.row(b, h, i);
        const T* doi = dout.row(b, h, i);
        const T* oi = o.row(b, h, i);
        A di = 0;
        for (int64_t d = 0; d < D; ++d) {
          qr[d] = static_cast<A>(qi[d]);
          dor[d] = static_cast<A>(doi[d]);
          di += dor[d] * static_cast<A>(oi[d]);
        }
        const A li = lse[bh * L + i];
        const int64_t n = key_limit(p, i);
        std::fill(dqr.begin(), dqr.end(), A(0));
        for (int64_t j = 0; j < n; ++j) {
          const T* kj = k.row(b, h, j);
          const T* vj = v.row(b, h, j);
          const A pij = std::exp(scale * dot(qr.data(), kj, D) - li);
          const A dp = dot(dor.data(), vj, D);
          const A ds = pij * (dp - di) * scale;
          A* dkj = dkh.data() + j * D;
          A* dvj = dvh.data() + j * D;
          for (int64_t d = 0; d < D; ++d) {
            dqr[d] += ds * static_cast<A>(kj[d]);
            dkj[d] += ds * qr[d];
            dvj[d] += pij * dor[d];
          }
        }
        T* dqi = dq.row(b, h, i);
        for (int64_t d = 0; d < D; ++d) dqi[d] = static_cast<T>(dqr[d]);
      }
      for (int64_t j = 0; j < S; ++j) {
        T* dkj = dk.row(b, h, j);
        T* dvj = dv.row(b, h, j);
        for (int64_t d = 0; d < D; ++d) {
          dkj[d] = static_cast<T>(dkh[j * D + d]);
          dvj[d] = static_cast<T>(dvh[j * D + d]);
        }
      }
    }
  }
}

void forward_cpu(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                 const AttentionParams& p) {
  dispatch_floating(q.dtype(), "flash_attention_forward",
                    [&]<class T>(TypeTag<T>) { forward<T>(out, lse, q, k, v, p); });
}

void backward_cpu(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout, const Tensor& q,
                  const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, const AttentionParams& p) {
  dispatch_floating(q.dtype(), "flash_attention_backward",
                    [&]<class T>(TypeTag<T>) { backward<T>(dq, dk, dv, dout, q, k, v, out, lse, p); });
}

}  // namespace

void register_attention() {
  attention_forward_kernel.set(DeviceType::CPU, &forward_cpu);
  attention_backward_kernel.set(DeviceType::CPU, &backward_cpu);
}

}  // namespace tessera::cpu
