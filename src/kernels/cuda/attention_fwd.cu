// Flash attention forward on the GPU (FlashAttention-2 with mma.sync tensor-core instructions):
// attention_forward_kernel (ops/attention_kernel.h, Note [Flash attention layout]). q (B, H, L, D),
// k, v (B, H, S, D) of T in {__half, __nv_bfloat16}, last dim contiguous, other strides as given,
// row starts 16-byte aligned; out (B, H, L, D) T, last dim contiguous, other strides as given (tessera
// allocates it (B, L, H, D): Note [Flash attention layout]); lse (B, H, L) float, contiguous. D in
// {64, 128}.
//
// One CTA = 4 warps = 128 query rows of one (b, h); warp w owns rows 32w .. 32w+31 (two mma m-tiles,
// so that each K / V fragment read from shared memory feeds two products). For D = 64 the Q tile is
// read once into registers (A fragments); for D = 128 its fragments are re-read from shared memory
// per tile (registers). K and V tiles (64 keys for D = 64, 32 for D = 128) stream through shared
// memory, double-buffered with cp.async (the copy of tile j+1 overlaps the math of tile j).
// Per KV tile, per warp: S = Q K^T (float accumulators), scaled to log2 units (s * scale * log2(e)),
// masked (keys >= S, and keys after the query when causal), online softmax in float (running max m
// and sum l per row, exp2f), then O += P V with P packed to T straight from the S accumulators (Note
// [MMA fragments] in attention_common.cuh). lse = m ln 2 + ln(l).
// Causal: a CTA visits only the KV tiles up to its diagonal (the skipped tiles are fully masked);
// CTAs are scheduled heaviest (last query tile) first so that the long ones start early.
// FwdCfg's MT = 1 gives the plainer variant (64-row CTAs, one m-tile per warp), kept for comparison.
//
// Shared memory: Q 128 x (D + 8) + 2 stages x (K, V) kBc x (D + 8) elements: 69,632 bytes for
// D = 128, 55,296 bytes for D = 64; about 230-242 registers per thread: 2 CTAs (8 warps) per SM.
// Expected speed on an H200 (mma.sync peaks near 2/3 of the wgmma rate, ~660 TFLOP/s): about
// 250-350 TFLOP/s for causal D = 128 at T = 2048, somewhat less for D = 64 (more softmax per FLOP).
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/attention_cudnn.h"
#include "kernels/cuda/cuda_kernels.h"
#include "ops/attention_kernel.h"

namespace tessera::cuda {
namespace attn {

// kMT m-tiles (16 rows each) per warp: 2 halves the shared-memory traffic of the K and V fragments
// per mma (each B fragment feeds two products); 1 is the plainer variant (64-row CTAs).
template <int D, int MT = 2>
struct FwdCfg {
  static constexpr int kMT = MT, kWarps = 4, kThreads = 128, kBr = 64 * MT, kLds = D + 8;
  static constexpr int kBc = D == 128 && MT == 2 ? 32 : 64;  // keys per tile (register budget)
  static constexpr bool kQInRegs = D * MT <= 128;           // else Q fragments are re-read from shared memory
  static constexpr int kSmem = (kBr + 4 * kBc) * kLds * 2;  // Q + 2 stages of K and V, 16-bit elements
};

template <class T, int D, int MT>
__global__ void __launch_bounds__(128) attn_fwd_kernel(const Params p) {
#if TS_ATTN_SM80
  using C = FwdCfg<D, MT>;
  constexpr int kLds = C::kLds, kBr = C::kBr, kBc = C::kBc, NT = C::kThreads;
  constexpr bool kQInRegs = C::kQInRegs;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* qs = reinterpret_cast<T*>(smem_raw);
  T* ks = qs + kBr * kLds;      // 2 stages
  T* vs = ks + 2 * kBc * kLds;  // 2 stages

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3;
  const int bh = blockIdx.x, b = bh / p.heads, h = bh % p.heads;
  const int row0 = (gridDim.y - 1 - blockIdx.y) * kBr;  // heaviest query tile first
  const int wrow = warp * 16 * MT;                      // the warp's first row in the tile
  const T* qg = static_cast<const T*>(p.q) + b * p.q_sb + h * p.q_sh + static_cast<int64_t>(row0) * p.q_sn;
  const T* kg = static_cast<const T*>(p.k) + b * p.k_sb + h * p.k_sh;
  const T* vg = static_cast<const T*>(p.v) + b * p.v_sb + h * p.v_sh;
  const int kv_end = p.causal ? min(p.kv_len, row0 + kBr) : p.kv_len;  // keys this tile may see
  const int n_tiles = (kv_end + kBc - 1) / kBc;                         // >= 1 (kv_len >= 1)

  load_tile<kBr, D, NT>(qs, qg, p.q_sn, min(kBr, p.q_len - row0), tid);
  load_tile<kBc, D, NT>(ks, kg, p.k_sn, min(kBc, p.kv_len), tid);
  load_tile<kBc, D, NT>(vs, vg, p.v_sn, min(kBc, p.kv_len), tid);
  cp_async_commit();

  uint32_t qf[kQInRegs ? MT : 1][kQInRegs ? D / 16 : 1][4];
  float o[MT][D / 8][4];
  float m[MT][2], l[MT][2];  // running max (log2 units) and this lane's partial sum, rows g and g + 8
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int i = 0; i < D / 8; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.f;
  }

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
    if constexpr (kQInRegs) {
      if (j == 0) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
          for (int kk = 0; kk < D / 16; ++kk) a_frag<kLds>(qf[mt][kk], qs, wrow + mt * 16, kk * 16, lane);
      }
    }
    const T* kt = ks + st * kBc * kLds;
    const T* vt = vs + st * kBc * kLds;

    // S = Q K^T (16 MT x kBc per warp).
    float s[MT][kBc / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int i = 0; i < kBc / 8; ++i) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[MT][4];
      if constexpr (!kQInRegs) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) a_frag<kLds>(qa[mt], qs, wrow + mt * 16, kk * 16, lane);
      }
#pragma unroll
      for (int np = 0; np < kBc / 16; ++np) {
        uint32_t bf[4];
        b_frag_nk<kLds>(bf, kt, np * 16, kk * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if constexpr (kQInRegs) {
            mma<T>(s[mt][2 * np], qf[mt][kk], bf[0], bf[1]);
            mma<T>(s[mt][2 * np + 1], qf[mt][kk], bf[2], bf[3]);
          } else {
            mma<T>(s[mt][2 * np], qa[mt], bf[0], bf[1]);
            mma<T>(s[mt][2 * np + 1], qa[mt], bf[2], bf[3]);
          }
        }
      }
    }

    const int kv0 = j * kBc;
    const bool need_mask = kv0 + kBc > p.kv_len || (p.causal && kv0 + kBc - 1 > row0);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int ra = row0 + wrow + mt * 16 + g, rb = ra + 8;
      // Scale to log2 units and mask.
#pragma unroll
      for (int nt = 0; nt < kBc / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[mt][nt][e] *= p.scale_log2;
          if (need_mask) {
            const int col = kv0 + nt * 8 + 2 * t4 + (e & 1);
            const int row = e < 2 ? ra : rb;
            if (col >= p.kv_len || (p.causal && col > row)) s[mt][nt][e] = -INFINITY;
          }
        }
      }
      // Online softmax: new running max, rescale of the old sum and output.
      float mx0 = m[mt][0], mx1 = m[mt][1];
#pragma unroll
      for (int nt = 0; nt < kBc / 8; ++nt) {
        mx0 = fmaxf(mx0, fmaxf(s[mt][nt][0], s[mt][nt][1]));
        mx1 = fmaxf(mx1, fmaxf(s[mt][nt][2], s[mt][nt][3]));
      }
      mx0 = quad_max(mx0);
      mx1 = quad_max(mx1);
      // A row that has seen only masked keys keeps max -inf: subtract 0 then (exp2(-inf) = 0, no NaN).
      const float mu0 = mx0 == -INFINITY ? 0.f : mx0, mu1 = mx1 == -INFINITY ? 0.f : mx1;
      const float a0 = exp2f(m[mt][0] - mu0), a1 = exp2f(m[mt][1] - mu1);
      m[mt][0] = mx0;
      m[mt][1] = mx1;
      float rs0 = 0.f, rs1 = 0.f;
#pragma unroll
      for (int nt = 0; nt < kBc / 8; ++nt) {
        s[mt][nt][0] = exp2f(s[mt][nt][0] - mu0);
        s[mt][nt][1] = exp2f(s[mt][nt][1] - mu0);
        s[mt][nt][2] = exp2f(s[mt][nt][2] - mu1);
        s[mt][nt][3] = exp2f(s[mt][nt][3] - mu1);
        rs0 += s[mt][nt][0] + s[mt][nt][1];
        rs1 += s[mt][nt][2] + s[mt][nt][3];
      }
      l[mt][0] = l[mt][0] * a0 + rs0;  // this lane's columns; the quad's partial sums are added at the end
      l[mt][1] = l[mt][1] * a1 + rs1;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        o[mt][dt][0] *= a0;
        o[mt][dt][1] *= a0;
        o[mt][dt][2] *= a1;
        o[mt][dt][3] *= a1;
      }
    }

    // O += P V (each V fragment feeds the MT m-tiles).
#pragma unroll
    for (int kc = 0; kc < kBc / 16; ++kc) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) c_to_a<T>(pa[mt], s[mt][2 * kc], s[mt][2 * kc + 1]);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t bf[4];
        b_frag_kn<kLds>(bf, vt, kc * 16, dp * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma<T>(o[mt][2 * dp], pa[mt], bf[0], bf[1]);
          mma<T>(o[mt][2 * dp + 1], pa[mt], bf[2], bf[3]);
        }
      }
    }
    __syncthreads();  // the next iteration's copy overwrites this stage
  }

  T* og = static_cast<T*>(p.o) + b * p.w_sb + h * p.w_sh;
  constexpr float kLn2 = 0.6931471805599453f;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = row0 + wrow + mt * 16 + g + half * 8;
      const float sum = quad_sum(l[mt][half]);  // every lane of the warp takes part in the shuffle
      if (r >= p.q_len) continue;
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt)
        *reinterpret_cast<uint32_t*>(og + static_cast<int64_t>(r) * p.w_sn + dt * 8 + 2 * t4) =
            pack2<T>(o[mt][dt][2 * half] * inv, o[mt][dt][2 * half + 1] * inv);
      if (t4 == 0) p.lse[static_cast<int64_t>(bh) * p.q_len + r] = m[mt][half] * kLn2 + logf(sum);
    }
  }
#endif
}

template <class T, int D, int MT = 2>
void launch_fwd(const Params& p, int64_t heads_total, cudaStream_t stream) {
  using C = FwdCfg<D, MT>;
  const int64_t m_tiles = (p.q_len + C::kBr - 1) / C::kBr;
  TS_CHECK(m_tiles <= 65535 && heads_total <= 0x7fffffff, NotImplementedError,
           "flash_attention_forward: the GPU kernel takes at most 65535 * ", C::kBr,
           " query rows and 2^31 - 1 heads, got ", p.q_len, " rows and ", heads_total, " heads");
  prepare_kernel<attn_fwd_kernel<T, D, MT>>(C::kSmem, "flash_attention_forward");
  const dim3 grid(static_cast<unsigned>(heads_total), static_cast<unsigned>(m_tiles));
  attn_fwd_kernel<T, D, MT><<<grid, C::kThreads, C::kSmem, stream>>>(p);
  check_launch("flash_attention_forward", "attn_fwd_kernel");
}

}  // namespace attn

namespace {

void attention_forward_cuda(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                            const AttentionParams& ap) {
  CurrentDevice guard(q.device().index());
  if (attention_forward_cudnn(out, lse, q, k, v, ap)) return;  // cuDNN's fused engine where it applies
  attn::Params p = attn::make_params(q, k, v, ap);
  p.o = out.data_ptr();
  attn::set_strides(p.w_sb, p.w_sh, p.w_sn, out);
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
