// Flash attention forward on the GPU (FlashAttention-2 with mma.sync tensor-core instructions):
// attention_forward_kernel (ops/attention_kernel.h, Note [Flash attention layout]). q (B, H, L, D),
// k, v (B, H, S, D) of T in {__half, __nv_bfloat16}, last dim contiguous, other strides as given,
// row starts 16-byte aligned; out (B, H, L, D) T and lse (B, H, L) float, contiguous. D in {64, 128}.
//
// One CTA = 4 warps = 64 query rows of one (b, h); warp w owns rows 16w .. 16w+15 (one mma m-tile).
// The Q tile is read once into registers (A fragments); K and V tiles of 64 keys stream through
// shared memory, double-buffered with cp.async (the copy of tile j+1 overlaps the math of tile j).
// Per KV tile, per warp: S = Q K^T (16 x 64, float accumulators), scaled to log2 units
// (s * scale * log2(e)), masked (keys >= S, and keys after the query when causal), online softmax in
// float (running max m and sum l per row, exp2f), then O += P V with P packed to T straight from the
// S accumulators (Note [MMA fragments] in attention_common.cuh). lse = m ln 2 + ln(l).
// Causal: a CTA visits only the KV tiles up to its diagonal (the skipped tiles are fully masked);
// CTAs are scheduled heaviest (last query tile) first so that the long ones start early.
//
// Shared memory: Q 64 x (D + 8) + 2 stages x (K, V) 64 x (D + 8) elements: 87,040 bytes for D = 128
// (2 CTAs per SM on sm_90), 46,080 bytes for D = 64.
// Expected speed on an H200 (mma.sync peaks near 2/3 of the wgmma rate): about 250-330 TFLOP/s for
// causal D = 128 at T = 2048, somewhat less for D = 64.
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "ops/attention_kernel.h"

namespace tessera::cuda {
namespace attn {

template <int D>
struct FwdCfg {
  static constexpr int kWarps = 4, kThreads = 128, kBr = 64, kBc = 64, kLds = D + 8;
  static constexpr int kSmem = (kBr + 4 * kBc) * kLds * 2;  // Q + 2 stages of K and V, 16-bit elements
};

template <class T, int D>
__global__ void __launch_bounds__(128) attn_fwd_kernel(const Params p) {
#if TS_ATTN_SM80
  using C = FwdCfg<D>;
  constexpr int kLds = C::kLds, kBr = C::kBr, kBc = C::kBc, NT = C::kThreads;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* qs = reinterpret_cast<T*>(smem_raw);
  T* ks = qs + kBr * kLds;      // 2 stages
  T* vs = ks + 2 * kBc * kLds;  // 2 stages

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int bh = blockIdx.x, b = bh / p.heads, h = bh % p.heads;
  const int row0 = (gridDim.y - 1 - blockIdx.y) * kBr;  // heaviest query tile first
  const T* qg = static_cast<const T*>(p.q) + b * p.q_sb + h * p.q_sh + static_cast<int64_t>(row0) * p.q_sn;
  const T* kg = static_cast<const T*>(p.k) + b * p.k_sb + h * p.k_sh;
  const T* vg = static_cast<const T*>(p.v) + b * p.v_sb + h * p.v_sh;
  const int kv_end = p.causal ? min(p.kv_len, row0 + kBr) : p.kv_len;  // keys this tile may see
  const int n_tiles = (kv_end + kBc - 1) / kBc;                         // >= 1 (kv_len >= 1)

  load_tile<kBr, D, NT>(qs, qg, p.q_sn, min(kBr, p.q_len - row0), tid);
  load_tile<kBc, D, NT>(ks, kg, p.k_sn, min(kBc, p.kv_len), tid);
  load_tile<kBc, D, NT>(vs, vg, p.v_sn, min(kBc, p.kv_len), tid);
  cp_async_commit();

  uint32_t qf[D / 16][4];
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;  // rows g and g + 8 of the warp (log2 units)
  const int ra = row0 + warp * 16 + g, rb = ra + 8;

  for (int j = 0; j < n_tiles; ++j) {
    const int st = j & 1;
    if (j + 1 < n_tiles) {
      const int nxt = (j + 1) * kBc;
      load_tile<kBc, D, NT>(ks + (st ^ 1) * kBc * kLds, kg + static_cast<int64_t>(nxt) * p.k_sn, p.k_sn,
                            min(kBc, p.kv_len - nxt), tid);
      load_tile<kBc, D, NT>(vs + (st ^ 1) * kBc * kLds, vg + static_cast<int64_t>(nxt) * p.v_sn, p.v_sn,
                            min(kBc, p.kv_len - nxt), tid);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (j == 0) {
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) a_frag<kLds>(qf[kk], qs, warp * 16, kk * 16, lane);
    }
    const T* kt = ks + st * kBc * kLds;
    const T* vt = vs + st * kBc * kLds;

    // S = Q K^T (16 x kBc per warp).
    float s[kBc / 8][4];
#pragma unroll
    for (int i = 0; i < kBc / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < kBc / 16; ++np) {
        uint32_t bf[4];
        b_frag_nk<kLds>(bf, kt, np * 16, kk * 16, lane);
        mma<T>(s[2 * np], qf[kk], bf[0], bf[1]);
        mma<T>(s[2 * np + 1], qf[kk], bf[2], bf[3]);
      }
    }

    // Scale to log2 units and mask.
    const int kv0 = j * kBc;
    const bool need_mask = kv0 + kBc > p.kv_len || (p.causal && kv0 + kBc - 1 > row0);
#pragma unroll
    for (int nt = 0; nt < kBc / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[nt][e] *= p.scale_log2;
        if (need_mask) {
          const int col = kv0 + nt * 8 + 2 * t4 + (e & 1);
          const int row = e < 2 ? ra : rb;
          if (col >= p.kv_len || (p.causal && col > row)) s[nt][e] = -INFINITY;
        }
      }
    }

    // Online softmax: new running max, rescale of the old sum and output.
    float mx0 = m0, mx1 = m1;
#pragma unroll
    for (int nt = 0; nt < kBc / 8; ++nt) {
      mx0 = fmaxf(mx0, fmaxf(s[nt][0], s[nt][1]));
      mx1 = fmaxf(mx1, fmaxf(s[nt][2], s[nt][3]));
    }
    mx0 = quad_max(mx0);
    mx1 = quad_max(mx1);
    // A row that has seen only masked keys keeps max -inf: subtract 0 then (exp2(-inf) = 0, no NaN).
    const float mu0 = mx0 == -INFINITY ? 0.f : mx0, mu1 = mx1 == -INFINITY ? 0.f : mx1;
    const float a0 = exp2f(m0 - mu0), a1 = exp2f(m1 - mu1);
    m0 = mx0;
    m1 = mx1;
    float rs0 = 0.f, rs1 = 0.f;
#pragma unroll
    for (int nt = 0; nt < kBc / 8; ++nt) {
      s[nt][0] = exp2f(s[nt][0] - mu0);
      s[nt][1] = exp2f(s[nt][1] - mu0);
      s[nt][2] = exp2f(s[nt][2] - mu1);
      s[nt][3] = exp2f(s[nt][3] - mu1);
      rs0 += s[nt][0] + s[nt][1];
      rs1 += s[nt][2] + s[nt][3];
    }
    l0 = l0 * a0 + rs0;  // this lane's columns; the quad's four partial sums are added at the end
    l1 = l1 * a1 + rs1;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      o[dt][0] *= a0;
      o[dt][1] *= a0;
      o[dt][2] *= a1;
      o[dt][3] *= a1;
    }

    // O += P V.
#pragma unroll
    for (int kc = 0; kc < kBc / 16; ++kc) {
      uint32_t pa[4];
      c_to_a<T>(pa, s[2 * kc], s[2 * kc + 1]);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t bf[4];
        b_frag_kn<kLds>(bf, vt, kc * 16, dp * 16, lane);
        mma<T>(o[2 * dp], pa, bf[0], bf[1]);
        mma<T>(o[2 * dp + 1], pa, bf[2], bf[3]);
      }
    }
    __syncthreads();  // the next iteration's copy overwrites this stage
  }

  l0 = quad_sum(l0);
  l1 = quad_sum(l1);
  const float inv0 = l0 > 0.f ? 1.f / l0 : 0.f, inv1 = l1 > 0.f ? 1.f / l1 : 0.f;
  T* og = static_cast<T*>(p.o) + static_cast<int64_t>(bh) * p.q_len * D;
  constexpr float kLn2 = 0.6931471805599453f;
  if (ra < p.q_len) {
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      *reinterpret_cast<uint32_t*>(og + static_cast<int64_t>(ra) * D + dt * 8 + 2 * t4) =
          pack2<T>(o[dt][0] * inv0, o[dt][1] * inv0);
    if (t4 == 0) p.lse[static_cast<int64_t>(bh) * p.q_len + ra] = m0 * kLn2 + logf(l0);
  }
  if (rb < p.q_len) {
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      *reinterpret_cast<uint32_t*>(og + static_cast<int64_t>(rb) * D + dt * 8 + 2 * t4) =
          pack2<T>(o[dt][2] * inv1, o[dt][3] * inv1);
    if (t4 == 0) p.lse[static_cast<int64_t>(bh) * p.q_len + rb] = m1 * kLn2 + logf(l1);
  }
#endif
}

template <class T, int D>
void launch_fwd(const Params& p, int64_t heads_total, cudaStream_t stream) {
  using C = FwdCfg<D>;
  const int64_t m_tiles = (p.q_len + C::kBr - 1) / C::kBr;
  TS_CHECK(m_tiles <= 65535 && heads_total <= 0x7fffffff, NotImplementedError,
           "flash_attention_forward: the GPU kernel takes at most 65535 * 64 query rows and 2^31 - 1 heads, got ",
           p.q_len, " rows and ", heads_total, " heads");
  check_tensor_core_binary(reinterpret_cast<const void*>(attn_fwd_kernel<T, D>), "flash_attention_forward");
  TS_CUDA_CHECK(cudaFuncSetAttribute(attn_fwd_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem));
  const dim3 grid(static_cast<unsigned>(heads_total), static_cast<unsigned>(m_tiles));
  attn_fwd_kernel<T, D><<<grid, C::kThreads, C::kSmem, stream>>>(p);
  check_launch("flash_attention_forward", "attn_fwd_kernel");
}

}  // namespace attn

namespace {

void attention_forward_cuda(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                            const AttentionParams& ap) {
  CurrentDevice guard(q.device().index());
  attn::Params p = attn::make_params(q, k, v, ap);
  p.o = out.data_ptr();
  p.lse = static_cast<float*>(lse.data_ptr());
  const cudaStream_t stream = stream_of(q);
  const int64_t bh = ap.batch * ap.heads;
  attn::dispatch_attention(q.dtype(), ap.head_dim, "flash_attention_forward", [&]<class T, int D>() {
    attn::launch_fwd<T, D>(p, bh, stream);
  });
}

}  // namespace

void register_attention_forward() { attention_forward_kernel.set(DeviceType::CUDA, &attention_forward_cuda); }

}  // namespace tessera::cuda
