// Flash attention backward on the GPU (FlashAttention-2's algorithm, made deterministic):
// attention_backward_kernel (ops/attention_kernel.h, Note [Flash attention layout]). Inputs dout,
// q, out (B, H, L, D), k, v (B, H, S, D) of T in {__half, __nv_bfloat16}, last dim contiguous, rows
// 16-byte aligned; lse (B, H, L) float; outputs dq, dk, dv of T, last dim contiguous, written through
// their strides. D in {64, 128}.
//
// Three kernels, no atomics (every sum runs in an order fixed by the shapes, so two runs are
// bitwise equal and tessera's determinism switch holds):
//  1. attn_bwd_delta_kernel: delta_i = dout_i . out_i (float, one warp per row, fixed butterfly),
//     into workspace memory.
//  2. attn_bwd_dkdv_kernel: one CTA per 64 keys of one (b, h), 4 warps x 16 keys. The CTA's K and V
//     rows stay in shared memory; Q, dout (and lse, delta) tiles of kBq rows stream through shared
//     memory, double-buffered with cp.async. Per tile and warp, in the transposed form so that
//     every product keeps its accumulators in registers:
//       S^T = K_w Q^T,  P^T = exp2(S^T scale log2(e) - lse log2(e)) (masked: 0),
//       dV_w += P^T dO,  dP^T = V_w dO^T,  dS^T = P^T (dP^T - delta),  dK_w += dS^T Q;
//     dK is scaled by `scale` once at the end. Causal: only the query tiles at or after the keys.
//  3. attn_bwd_dq_kernel: one CTA per 128 query rows, 4 warps x 32 rows (two m-tiles, so that each
//     K / V fragment feeds two products); K and V tiles of kBk keys
//     stream through shared memory (double-buffered): S = Q_w K^T, P from lse, dP = dO_w V^T,
//     dS = P (dP - delta), dQ_w += dS K; scaled at the end. Causal: only the KV tiles up to the
//     diagonal. This recomputes S and dP once more than FlashAttention-2 (which adds dQ with float
//     atomics from kernel 2): the price of determinism, about 7/5 of its matrix work.
// P and dS are rounded to T for their products, as FlashAttention-2 does. Fragment layouts: Note [MMA
// fragments] in attention_common.cuh.
// Shared memory (D = 128 / 64): dkdv 70,144 / 56,320 bytes, dq 104,448 / 73,728 bytes. Registers
// (ptxas, sm_90, bf16, D = 64): dkdv 176, no spills.
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/cuda_kernels.h"
#include "ops/attention_kernel.h"

namespace tessera::cuda {
namespace attn {

template <int D>
struct BwdCfg {
  static constexpr int kThreads = 128, kLds = D + 8;
  static constexpr int kBkv = 64;               // keys per dkdv CTA (4 warps x 16)
  static constexpr int kBq = D == 64 ? 64 : 32;  // query rows per dkdv step
  static constexpr int kMT = 2;                 // m-tiles per warp in the dq kernel
  static constexpr int kBm = 64 * kMT;          // query rows per dq CTA (4 warps x 16 kMT)
  static constexpr int kBk = D == 64 ? 64 : 32;  // keys per dq step
  static constexpr int kSmemDkdv = (2 * kBkv + 4 * kBq) * kLds * 2 + 4 * kBq * 4;
  static constexpr int kSmemDq = (2 * kBm + 4 * kBk) * kLds * 2;
};

template <class T, int D>
__global__ void __launch_bounds__(256) attn_bwd_delta_kernel(const Params p, int64_t rows) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int lane = threadIdx.x & 31;
  const int64_t bh = row / p.q_len;
  const int64_t i = row % p.q_len, b = bh / p.heads, h = bh % p.heads;
  const T* o = static_cast<const T*>(p.out) + b * p.o_sb + h * p.o_sh + i * p.o_sn;
  const T* d = static_cast<const T*>(p.dout) + b * p.do_sb + h * p.do_sh + i * p.do_sn;
  float acc = 0.f;
#pragma unroll
  for (int c = lane * 2; c < D; c += 64)
    acc += static_cast<float>(o[c]) * static_cast<float>(d[c]) + static_cast<float>(o[c + 1]) * static_cast<float>(d[c + 1]);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) p.delta[row] = acc;
}

// lse (in log2 units) and delta of query rows [q0, q0 + n) into shared memory; rows past L get
// lse = +inf (P = 0) and delta = 0. Threads [0, n) each store one row.
__device__ __forceinline__ void load_row_stats(float* lse2_s, float* dl_s, const Params& p, int64_t bh, int q0,
                                               int n, int tid) {
  if (tid < n) {
    const int r = q0 + tid;
    const bool ok = r < p.q_len;
    lse2_s[tid] = ok ? p.lse[bh * p.q_len + r] * kLog2e : INFINITY;
    dl_s[tid] = ok ? p.delta[bh * p.q_len + r] : 0.f;
  }
}

template <class T, int D>
__global__ void __launch_bounds__(128) attn_bwd_dkdv_kernel(const Params p) {
#if TS_ATTN_SM80
  using C = BwdCfg<D>;
  constexpr int kLds = C::kLds, kBkv = C::kBkv, kBq = C::kBq, NT = C::kThreads;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* ks = reinterpret_cast<T*>(smem_raw);
  T* vs = ks + kBkv * kLds;
  T* qs = vs + kBkv * kLds;   // 2 stages
  T* dos = qs + 2 * kBq * kLds;  // 2 stages
  float* lse2_s = reinterpret_cast<float*>(dos + 2 * kBq * kLds);  // 2 stages
  float* dl_s = lse2_s + 2 * kBq;                                   // 2 stages

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int bh = blockIdx.x, b = bh / p.heads, h = bh % p.heads;
  const int kv0 = blockIdx.y * kBkv;  // causal: the first key tiles see the most queries, and start first
  const int kv_valid = min(kBkv, p.kv_len - kv0);
  const int ka = kv0 + warp * 16 + g, kb = ka + 8;  // this lane's key rows
  T* dkg = static_cast<T*>(p.dk) + b * p.dk_sb + h * p.dk_sh;
  T* dvg = static_cast<T*>(p.dv) + b * p.dv_sb + h * p.dv_sh;

  const int m_begin = p.causal ? kv0 / kBq : 0;  // query tiles holding rows >= kv0
  const int m_end = (p.q_len + kBq - 1) / kBq;
  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    dk[i][0] = dk[i][1] = dk[i][2] = dk[i][3] = 0.f;
    dv[i][0] = dv[i][1] = dv[i][2] = dv[i][3] = 0.f;
  }

  if (m_begin < m_end) {
    const T* qg = static_cast<const T*>(p.q) + b * p.q_sb + h * p.q_sh;
    const T* dog = static_cast<const T*>(p.dout) + b * p.do_sb + h * p.do_sh;
    load_tile<kBkv, D, NT>(ks, static_cast<const T*>(p.k) + b * p.k_sb + h * p.k_sh + static_cast<int64_t>(kv0) * p.k_sn,
                           p.k_sn, kv_valid, tid);
    load_tile<kBkv, D, NT>(vs, static_cast<const T*>(p.v) + b * p.v_sb + h * p.v_sh + static_cast<int64_t>(kv0) * p.v_sn,
                           p.v_sn, kv_valid, tid);
    {
      const int q0 = m_begin * kBq;
      load_tile<kBq, D, NT>(qs, qg + static_cast<int64_t>(q0) * p.q_sn, p.q_sn, min(kBq, p.q_len - q0), tid);
      load_tile<kBq, D, NT>(dos, dog + static_cast<int64_t>(q0) * p.do_sn, p.do_sn, min(kBq, p.q_len - q0), tid);
      load_row_stats(lse2_s, dl_s, p, bh, q0, kBq, tid);
    }
    cp_async_commit();

    for (int m = m_begin; m < m_end; ++m) {
      const int st = (m - m_begin) & 1;
      if (m + 1 < m_end) {
        const int q1 = (m + 1) * kBq;
        load_tile<kBq, D, NT>(qs + (st ^ 1) * kBq * kLds, qg + static_cast<int64_t>(q1) * p.q_sn, p.q_sn,
                              min(kBq, p.q_len - q1), tid);
        load_tile<kBq, D, NT>(dos + (st ^ 1) * kBq * kLds, dog + static_cast<int64_t>(q1) * p.do_sn, p.do_sn,
                              min(kBq, p.q_len - q1), tid);
        load_row_stats(lse2_s + (st ^ 1) * kBq, dl_s + (st ^ 1) * kBq, p, bh, q1, kBq, tid);
        cp_async_commit();
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      __syncthreads();
      const T* qt = qs + st * kBq * kLds;
      const T* dot = dos + st * kBq * kLds;
      const float* lse2 = lse2_s + st * kBq;
      const float* dl = dl_s + st * kBq;
      const int q0 = m * kBq;

      // S^T = K_w Q^T (16 keys x kBq rows per warp).
      float s[kBq / 8][4];
#pragma unroll
      for (int i = 0; i < kBq / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t ka_f[4];
        a_frag<kLds>(ka_f, ks, warp * 16, kk * 16, lane);
#pragma unroll
        for (int np = 0; np < kBq / 16; ++np) {
          uint32_t bf[4];
          b_frag_nk<kLds>(bf, qt, np * 16, kk * 16, lane);
          mma<T>(s[2 * np], ka_f, bf[0], bf[1]);
          mma<T>(s[2 * np + 1], ka_f, bf[2], bf[3]);
        }
      }
      // P^T.
      const bool need_mask = q0 + kBq > p.q_len || kv0 + kBkv > p.kv_len || (p.causal && kv0 + kBkv - 1 > q0);
#pragma unroll
      for (int nt = 0; nt < kBq / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = nt * 8 + 2 * t4 + (e & 1);  // query row within the tile
          float pv = exp2f(s[nt][e] * p.scale_log2 - lse2[c]);
          if (need_mask) {
            const int qi = q0 + c, kj = e < 2 ? ka : kb;
            if (qi >= p.q_len || kj >= p.kv_len || (p.causal && kj > qi)) pv = 0.f;
          }
          s[nt][e] = pv;
        }
      }
      // dV_w += P^T dO.
#pragma unroll
      for (int kc = 0; kc < kBq / 16; ++kc) {
        uint32_t pa[4];
        c_to_a<T>(pa, s[2 * kc], s[2 * kc + 1]);
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t bf[4];
          b_frag_kn<kLds>(bf, dot, kc * 16, dp * 16, lane);
          mma<T>(dv[2 * dp], pa, bf[0], bf[1]);
          mma<T>(dv[2 * dp + 1], pa, bf[2], bf[3]);
        }
      }
      // dP^T = V_w dO^T.
      float dpt[kBq / 8][4];
#pragma unroll
      for (int i = 0; i < kBq / 8; ++i) dpt[i][0] = dpt[i][1] = dpt[i][2] = dpt[i][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t va_f[4];
        a_frag<kLds>(va_f, vs, warp * 16, kk * 16, lane);
#pragma unroll
        for (int np = 0; np < kBq / 16; ++np) {
          uint32_t bf[4];
          b_frag_nk<kLds>(bf, dot, np * 16, kk * 16, lane);
          mma<T>(dpt[2 * np], va_f, bf[0], bf[1]);
          mma<T>(dpt[2 * np + 1], va_f, bf[2], bf[3]);
        }
      }
      // dS^T = P^T (dP^T - delta).
#pragma unroll
      for (int nt = 0; nt < kBq / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) dpt[nt][e] = s[nt][e] * (dpt[nt][e] - dl[nt * 8 + 2 * t4 + (e & 1)]);
      }
      // dK_w += dS^T Q.
#pragma unroll
      for (int kc = 0; kc < kBq / 16; ++kc) {
        uint32_t da[4];
        c_to_a<T>(da, dpt[2 * kc], dpt[2 * kc + 1]);
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t bf[4];
          b_frag_kn<kLds>(bf, qt, kc * 16, dp * 16, lane);
          mma<T>(dk[2 * dp], da, bf[0], bf[1]);
          mma<T>(dk[2 * dp + 1], da, bf[2], bf[3]);
        }
      }
      __syncthreads();  // the next iteration's copy overwrites this stage
    }
  }

  // Keys no query sees (causal, kv0 >= L) get zeros.
  if (ka < p.kv_len) {
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      const int64_t c = dt * 8 + 2 * t4;
      *reinterpret_cast<uint32_t*>(dkg + static_cast<int64_t>(ka) * p.dk_sn + c) = pack2<T>(dk[dt][0] * p.scale, dk[dt][1] * p.scale);
      *reinterpret_cast<uint32_t*>(dvg + static_cast<int64_t>(ka) * p.dv_sn + c) = pack2<T>(dv[dt][0], dv[dt][1]);
    }
  }
  if (kb < p.kv_len) {
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      const int64_t c = dt * 8 + 2 * t4;
      *reinterpret_cast<uint32_t*>(dkg + static_cast<int64_t>(kb) * p.dk_sn + c) = pack2<T>(dk[dt][2] * p.scale, dk[dt][3] * p.scale);
      *reinterpret_cast<uint32_t*>(dvg + static_cast<int64_t>(kb) * p.dv_sn + c) = pack2<T>(dv[dt][2], dv[dt][3]);
    }
  }
#endif
}

// MT m-tiles (16 rows each) per warp: 2 lets each K / V fragment read from shared memory feed two
// products (128-row CTAs); 1 is the plainer variant (64-row CTAs).
template <class T, int D, int MT>
__global__ void __launch_bounds__(128) attn_bwd_dq_kernel(const Params p) {
#if TS_ATTN_SM80
  using C = BwdCfg<D>;
  constexpr int kLds = C::kLds, kBm = 64 * MT, kBk = C::kBk, NT = C::kThreads;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* qs = reinterpret_cast<T*>(smem_raw);
  T* dos = qs + kBm * kLds;
  T* ks = dos + kBm * kLds;     // 2 stages
  T* vs = ks + 2 * kBk * kLds;  // 2 stages

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int bh = blockIdx.x, b = bh / p.heads, h = bh % p.heads;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kBm;  // heaviest query tile first
  const int wrow = warp * 16 * MT;                    // the warp's first row in the tile
  const T* kg = static_cast<const T*>(p.k) + b * p.k_sb + h * p.k_sh;
  const T* vg = static_cast<const T*>(p.v) + b * p.v_sb + h * p.v_sh;
  const int kv_end = p.causal ? min(p.kv_len, q0 + kBm) : p.kv_len;
  const int n_tiles = (kv_end + kBk - 1) / kBk;  // >= 1

  load_tile<kBm, D, NT>(qs, static_cast<const T*>(p.q) + b * p.q_sb + h * p.q_sh + static_cast<int64_t>(q0) * p.q_sn,
                        p.q_sn, min(kBm, p.q_len - q0), tid);
  load_tile<kBm, D, NT>(dos,
                        static_cast<const T*>(p.dout) + b * p.do_sb + h * p.do_sh + static_cast<int64_t>(q0) * p.do_sn,
                        p.do_sn, min(kBm, p.q_len - q0), tid);
  load_tile<kBk, D, NT>(ks, kg, p.k_sn, min(kBk, p.kv_len), tid);
  load_tile<kBk, D, NT>(vs, vg, p.v_sn, min(kBk, p.kv_len), tid);
  cp_async_commit();

  // lse (log2 units) and delta of this lane's rows: [mt][0] row g, [mt][1] row g + 8 of m-tile mt.
  const int64_t stat0 = static_cast<int64_t>(bh) * p.q_len;
  float lse2[MT][2], dl[MT][2];
  float dq[MT][D / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = q0 + wrow + mt * 16 + g + hf * 8;
      lse2[mt][hf] = r < p.q_len ? p.lse[stat0 + r] * kLog2e : INFINITY;  // rows past L: P = 0
      dl[mt][hf] = r < p.q_len ? p.delta[stat0 + r] : 0.f;
    }
#pragma unroll
    for (int i = 0; i < D / 8; ++i) dq[mt][i][0] = dq[mt][i][1] = dq[mt][i][2] = dq[mt][i][3] = 0.f;
  }

  for (int j = 0; j < n_tiles; ++j) {
    const int st = j & 1;
    if (j + 1 < n_tiles) {
      const int nxt = (j + 1) * kBk;
      load_tile<kBk, D, NT>(ks + (st ^ 1) * kBk * kLds, kg + static_cast<int64_t>(nxt) * p.k_sn, p.k_sn,
                            min(kBk, p.kv_len - nxt), tid);
      load_tile<kBk, D, NT>(vs + (st ^ 1) * kBk * kLds, vg + static_cast<int64_t>(nxt) * p.v_sn, p.v_sn,
                            min(kBk, p.kv_len - nxt), tid);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const T* kt = ks + st * kBk * kLds;
    const T* vt = vs + st * kBk * kLds;
    const int kv0 = j * kBk;

    // S = Q_w K^T and dP = dO_w V^T (16 MT rows x kBk keys per warp).
    float s[MT][kBk / 8][4], dpm[MT][kBk / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < kBk / 8; ++i) {
        s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.f;
        dpm[mt][i][0] = dpm[mt][i][1] = dpm[mt][i][2] = dpm[mt][i][3] = 0.f;
      }
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[MT][4], da[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        a_frag<kLds>(qa[mt], qs, wrow + mt * 16, kk * 16, lane);
        a_frag<kLds>(da[mt], dos, wrow + mt * 16, kk * 16, lane);
      }
#pragma unroll
      for (int np = 0; np < kBk / 16; ++np) {
        uint32_t bk[4], bv[4];
        b_frag_nk<kLds>(bk, kt, np * 16, kk * 16, lane);
        b_frag_nk<kLds>(bv, vt, np * 16, kk * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma<T>(s[mt][2 * np], qa[mt], bk[0], bk[1]);
          mma<T>(s[mt][2 * np + 1], qa[mt], bk[2], bk[3]);
          mma<T>(dpm[mt][2 * np], da[mt], bv[0], bv[1]);
          mma<T>(dpm[mt][2 * np + 1], da[mt], bv[2], bv[3]);
        }
      }
    }
    // dS = P (dP - delta), P from lse (masked: 0).
    const bool need_mask = kv0 + kBk > p.kv_len || (p.causal && kv0 + kBk - 1 > q0);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int ra = q0 + wrow + mt * 16 + g, rb = ra + 8;
#pragma unroll
      for (int nt = 0; nt < kBk / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int hf = e >> 1;
          float pv = exp2f(s[mt][nt][e] * p.scale_log2 - lse2[mt][hf]);
          if (need_mask) {
            const int col = kv0 + nt * 8 + 2 * t4 + (e & 1);
            if (col >= p.kv_len || (p.causal && col > (hf ? rb : ra))) pv = 0.f;
          }
          s[mt][nt][e] = pv * (dpm[mt][nt][e] - dl[mt][hf]);
        }
      }
    }
    // dQ_w += dS K (each K fragment feeds the MT m-tiles).
#pragma unroll
    for (int kc = 0; kc < kBk / 16; ++kc) {
      uint32_t sa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) c_to_a<T>(sa[mt], s[mt][2 * kc], s[mt][2 * kc + 1]);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t bf[4];
        b_frag_kn<kLds>(bf, kt, kc * 16, dp * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma<T>(dq[mt][2 * dp], sa[mt], bf[0], bf[1]);
          mma<T>(dq[mt][2 * dp + 1], sa[mt], bf[2], bf[3]);
        }
      }
    }
    __syncthreads();  // the next iteration's copy overwrites this stage
  }

  T* dqg = static_cast<T*>(p.o) + static_cast<int64_t>(b) * p.w_sb + static_cast<int64_t>(h) * p.w_sh;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = q0 + wrow + mt * 16 + g + hf * 8;
      if (r >= p.q_len) continue;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt)
        *reinterpret_cast<uint32_t*>(dqg + static_cast<int64_t>(r) * p.w_sn + dt * 8 + 2 * t4) =
            pack2<T>(dq[mt][dt][2 * hf] * p.scale, dq[mt][dt][2 * hf + 1] * p.scale);
    }
  }
#endif
}

template <class T, int D>
void launch_bwd(const Params& p, int64_t heads_total, cudaStream_t stream) {
  using C = BwdCfg<D>;
  const char* op = "flash_attention_backward";
  const int64_t q_tiles = (p.q_len + C::kBm - 1) / C::kBm, kv_tiles = (p.kv_len + C::kBkv - 1) / C::kBkv;
  TS_CHECK(q_tiles <= 65535 && kv_tiles <= 65535 && heads_total <= 0x7fffffff, NotImplementedError, op,
           ": the GPU kernel takes at most 65535 * 64 query rows and keys and 2^31 - 1 heads, got ", p.q_len, ", ",
           p.kv_len, " and ", heads_total);
  const int64_t rows = heads_total * p.q_len;
  const dim3 kv_grid(static_cast<unsigned>(heads_total), static_cast<unsigned>(kv_tiles));
  prepare_kernel<attn_bwd_dkdv_kernel<T, D>>(C::kSmemDkdv, op);
  prepare_kernel<attn_bwd_dq_kernel<T, D, C::kMT>>(C::kSmemDq, op);
  attn_bwd_delta_kernel<T, D><<<grid_for(rows, 8, int64_t(1) << 31), 256, 0, stream>>>(p, rows);
  check_launch(op, "attn_bwd_delta_kernel");
  attn_bwd_dkdv_kernel<T, D><<<kv_grid, C::kThreads, C::kSmemDkdv, stream>>>(p);
  check_launch(op, "attn_bwd_dkdv_kernel");
  attn_bwd_dq_kernel<T, D, C::kMT><<<dim3(static_cast<unsigned>(heads_total), static_cast<unsigned>(q_tiles)), C::kThreads,
                             C::kSmemDq, stream>>>(p);
  check_launch(op, "attn_bwd_dq_kernel");
}

}  // namespace attn

namespace {

void attention_backward_cuda(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout, const Tensor& q,
                             const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                             const AttentionParams& ap) {
  CurrentDevice guard(q.device().index());
  if (attention_backward_cudnn(dq, dk, dv, dout, q, k, v, out, lse, ap)) return;  // cuDNN where it applies
  attn::Params p = attn::make_params(q, k, v, ap);
  p.out = out.data_ptr();
  p.dout = dout.data_ptr();
  attn::set_strides(p.o_sb, p.o_sh, p.o_sn, out);
  attn::set_strides(p.do_sb, p.do_sh, p.do_sn, dout);
  p.o = dq.data_ptr();
  p.dk = dk.data_ptr();
  p.dv = dv.data_ptr();
  attn::set_strides(p.w_sb, p.w_sh, p.w_sn, dq);
  attn::set_strides(p.dk_sb, p.dk_sh, p.dk_sn, dk);
  attn::set_strides(p.dv_sb, p.dv_sh, p.dv_sn, dv);
  p.lse = static_cast<float*>(lse.data_ptr());
  const int64_t bh = ap.batch * ap.heads;
  const cudaStream_t stream = stream_of(q);
  DataPtr delta = allocate_workspace(static_cast<size_t>(bh * ap.q_len) * sizeof(float));
  p.delta = static_cast<float*>(delta.get());
  attn::dispatch_attention(q.dtype(), ap.head_dim, "flash_attention_backward", [&]<class T, int D>() {
    attn::launch_bwd<T, D>(p, bh, stream);
  });
}

}  // namespace

void register_attention() {
  register_attention_forward();
  attention_backward_kernel.set(DeviceType::CUDA, &attention_backward_cuda);
}

}  // namespace tessera::cuda
