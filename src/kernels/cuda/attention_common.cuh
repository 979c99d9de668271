// Tensor-core building blocks of the flash attention kernels (attention_fwd.cu, attention_bwd.cu):
// mma.sync m16n8k16 (16-bit inputs, float accumulators), ldmatrix fragment loads from padded shared
// tiles, cp.async tile copies and the kernels' Params. Included from .cu files only.
//
// Note [MMA fragments] (PTX ISA, mma.m16n8k16 with .bf16 / .f16; lane = 4 * g + t, g = lane / 4 in
// 0..7 the group, t = lane % 4):
//   A (16 x 16, row-major), 4 registers of two 16-bit values, the lower column in the low half:
//     a0 = A[g][2t, 2t+1]   a1 = A[g+8][2t, 2t+1]   a2 = A[g][2t+8, 2t+9]   a3 = A[g+8][2t+8, 2t+9]
//   B (16 x 8, K x N, "col"), 2 registers:  b0 = B[2t, 2t+1][g]   b1 = B[2t+8, 2t+9][g]
//   C / D (16 x 8) float: c0, c1 = C[g][2t, 2t+1]   c2, c3 = C[g+8][2t, 2t+1]
// So the C fragments of two adjacent n-tiles (columns 16j .. 16j+15) are, packed to 16-bit pairs, the
// A fragment of the k-chunk j of the next product: a0 = (c0, c1) and a1 = (c2, c3) of n-tile 2j,
// a2 = (c0, c1) and a3 = (c2, c3) of n-tile 2j+1 (FlashAttention-2's register reuse of P and dS).
//
// ldmatrix.x4: lanes 8i .. 8i+7 give the row addresses of 8 x 8 matrix i (16 bytes each); register i
// receives matrix i with lane (g, t) holding M[g][2t, 2t+1]; with .trans it holds M[2t][g], M[2t+1][g].
// The three loads used (tiles row-major in shared memory with kLds = D + 8 elements per row):
//   a_frag(tile, r0, c0): A = tile[r0 .. r0+15][c0 .. c0+15]. Lane row r0 + (lane & 15), column
//     c0 + (lane >> 4) * 8: matrices (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15)
//     = a0, a1, a2, a3.
//   b_frag_nk(tile, n0, k0): B[k][n] = tile[n0 + n][k0 + k] (the tile holds B transposed, e.g. K for
//     Q K^T), two n-tiles. Lane row n0 + (lane & 7) + (lane >> 4) * 8, column k0 + ((lane >> 3) & 1) * 8:
//     matrices (n 0-7, k 0-7) = b0 and (n 0-7, k 8-15) = b1 of n-tile n0, then the same of n0 + 8.
//   b_frag_kn(tile, k0, n0): B[k][n] = tile[k0 + k][n0 + n] (e.g. V for P V), .trans, two n-tiles.
//     Lane row k0 + (lane & 7) + ((lane >> 3) & 1) * 8, column n0 + (lane >> 4) * 8: matrices
//     (k 0-7, n 0-7) = b0, (k 8-15, n 0-7) = b1 of n-tile n0, then the same of n0 + 8.
// Rows are padded by 8 elements (16 bytes): 8 consecutive rows of one ldmatrix start in 8 different
// 16-byte bank groups (row pitch 144 or 272 bytes), so the loads are free of bank conflicts, and
// every row start stays 16-byte aligned for ldmatrix and cp.async.
//
// Everything that needs sm_80 is compiled only for __CUDA_ARCH__ >= 800; older targets get empty
// bodies, and the host entry refuses to launch unless the kernel binary is for sm_80 or newer.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "ops/attention_kernel.h"

namespace tessera::cuda::attn {

inline constexpr float kLog2e = 1.4426950408889634f;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define TS_ATTN_SM80 1
#else
#define TS_ATTN_SM80 0
#endif

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronously; zero-filled when !valid (src is then not read).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
#if TS_ATTN_SM80
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(n));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if TS_ATTN_SM80
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if TS_ATTN_SM80
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
#if TS_ATTN_SM80
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
#endif
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], const void* p) {
#if TS_ATTN_SM80
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
#endif
}

// c += a * b (Note [MMA fragments]).
template <class T>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if TS_ATTN_SM80
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#endif
}

// Two floats as one register of 16-bit values, x in the low half (the lower column).
template <class T>
__device__ __forceinline__ uint32_t pack2(float x, float y) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<uint32_t*>(&h);
  } else {
    __half2 h = __floats2half2_rn(x, y);
    return *reinterpret_cast<uint32_t*>(&h);
  }
}

// The A fragment of C tiles 2j and 2j+1 (Note [MMA fragments]).
template <class T>
__device__ __forceinline__ void c_to_a(uint32_t (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
  a[0] = pack2<T>(c0[0], c0[1]);
  a[1] = pack2<T>(c0[2], c0[3]);
  a[2] = pack2<T>(c1[0], c1[1]);
  a[3] = pack2<T>(c1[2], c1[3]);
}

// Fragment loads from a padded row-major shared tile of row pitch LDS elements (Note [MMA fragments]).
template <int LDS, class T>
__device__ __forceinline__ void a_frag(uint32_t (&a)[4], const T* tile, int r0, int c0, int lane) {
  ldsm_x4(a, tile + (r0 + (lane & 15)) * LDS + c0 + (lane >> 4) * 8);
}
template <int LDS, class T>
__device__ __forceinline__ void b_frag_nk(uint32_t (&b)[4], const T* tile, int n0, int k0, int lane) {
  ldsm_x4(b, tile + (n0 + (lane & 7) + (lane >> 4) * 8) * LDS + k0 + ((lane >> 3) & 1) * 8);
}
template <int LDS, class T>
__device__ __forceinline__ void b_frag_kn(uint32_t (&b)[4], const T* tile, int k0, int n0, int lane) {
  ldsm_x4_trans(b, tile + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + n0 + (lane >> 4) * 8);
}

// Copies rows [0, ROWS) of a (rows, D) global tile (row pitch `stride` elements, rows >= `valid`
// zero-filled) into a padded shared tile, 16 bytes per cp.async, spread over NT threads.
template <int ROWS, int D, int NT, class T>
__device__ __forceinline__ void load_tile(T* smem, const T* gmem, int64_t stride, int valid, int tid) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  constexpr int kLds = D + 8;
#pragma unroll
  for (int c = tid; c < ROWS * kChunks; c += NT) {
    const int r = c / kChunks, ch = c % kChunks;
    const bool ok = r < valid;
    const T* src = ok ? gmem + r * stride + ch * 8 : gmem;
    cp_async16(smem + r * kLds + ch * 8, src, ok);
  }
}

// max / sum over the 4 lanes of a quad (the lanes holding one row of a C fragment).
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Grid-invariant arguments. Strides in elements for (B, H, N) (the last dim is contiguous), also of
// the written out / dq / dk / dv (w_*, dk_*, dv_*); lse and delta are contiguous.
struct Params {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* out = nullptr;   // backward: the forward's output
  const void* dout = nullptr;  // backward
  void* o = nullptr;           // forward: out; backward: dq
  void* dk = nullptr;
  void* dv = nullptr;
  float* lse = nullptr;    // (B, H, L)
  float* delta = nullptr;  // backward: (B, H, L) rowsum(dout * out)
  int64_t q_sb = 0, q_sh = 0, q_sn = 0;
  int64_t k_sb = 0, k_sh = 0, k_sn = 0;
  int64_t v_sb = 0, v_sh = 0, v_sn = 0;
  int64_t o_sb = 0, o_sh = 0, o_sn = 0;     // the forward's output (backward input)
  int64_t do_sb = 0, do_sh = 0, do_sn = 0;  // dout
  // The written tensors (Note [Flash attention layout]): o (forward: out; backward: dq), dk, dv.
  int64_t w_sb = 0, w_sh = 0, w_sn = 0;
  int64_t dk_sb = 0, dk_sh = 0, dk_sn = 0;
  int64_t dv_sb = 0, dv_sh = 0, dv_sn = 0;
  int heads = 0;
  int q_len = 0, kv_len = 0;
  float scale = 1.0f;       // softmax scale
  float scale_log2 = 1.0f;  // scale * log2(e)
  bool causal = false;
};

// Setting the tensors' strides into Params.
inline void set_strides(int64_t& sb, int64_t& sh, int64_t& sn, const Tensor& t) {
  sb = t.stride(0);
  sh = t.stride(1);
  sn = t.stride(2);
}

// Params from the kernel arguments (strides of q, k, v; lengths; scale).
inline Params make_params(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionParams& ap) {
  TS_CHECK(ap.q_len < (int64_t(1) << 31) && ap.kv_len < (int64_t(1) << 31), NotImplementedError,
           "flash attention: sequence lengths must be below 2^31 on the GPU, got ", ap.q_len, " and ", ap.kv_len);
  Params p;
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  set_strides(p.q_sb, p.q_sh, p.q_sn, q);
  set_strides(p.k_sb, p.k_sh, p.k_sn, k);
  set_strides(p.v_sb, p.v_sh, p.v_sn, v);
  p.heads = static_cast<int>(ap.heads);
  p.q_len = static_cast<int>(ap.q_len);
  p.kv_len = static_cast<int>(ap.kv_len);
  p.scale = static_cast<float>(ap.scale);
  p.scale_log2 = static_cast<float>(ap.scale * 1.4426950408889634);
  p.causal = ap.causal;
  return p;
}

// f.template operator()<T, D>() for T in {__half, __nv_bfloat16} and D in {64, 128}.
template <class F>
void dispatch_attention(DType dtype, int64_t d, const char* op, F&& f) {
  TS_CHECK(d == 64 || d == 128, NotImplementedError, op, ": the GPU kernel takes head dim 64 or 128, got ", d);
  if (dtype == kFloat16) {
    if (d == 64) f.template operator()<__half, 64>();
    else f.template operator()<__half, 128>();
  } else if (dtype == kBFloat16) {
    if (d == 64) f.template operator()<__nv_bfloat16, 64>();
    else f.template operator()<__nv_bfloat16, 128>();
  } else {
    TS_CHECK(false, NotImplementedError, op, ": the GPU kernel takes float16 or bfloat16, got ", dtype_name(dtype));
  }
}

// Raises NotImplementedError unless the kernel's binary for the current GPU is for sm_80 or newer
// (on older GPUs the kernel bodies are empty: see the top of this file).
inline void check_tensor_core_binary(const void* kernel, const char* op) {
  cudaFuncAttributes attr{};
  TS_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  TS_CHECK(attr.binaryVersion >= 80, NotImplementedError, op,
           ": the GPU kernel needs compute capability 8.0 or newer (mma.sync, ldmatrix, cp.async); the kernel "
           "binary for this GPU is for sm_", attr.binaryVersion);
}

// Once per kernel and device (the first launch; not again inside a graph capture): the binary check
// above and the opt-in to more than 48 KiB of dynamic shared memory.
template <auto Kernel>
void prepare_kernel(int smem_bytes, const char* op) {
  static std::atomic<uint64_t> done{0};  // bit d: device d is prepared (devices 0..63; others every time)
  int dev = 0;
  TS_CUDA_CHECK(cudaGetDevice(&dev));
  const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
  if (bit != 0 && (done.load(std::memory_order_acquire) & bit) != 0) return;
  check_tensor_core_binary(reinterpret_cast<const void*>(Kernel), op);
  TS_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  done.fetch_or(bit, std::memory_order_acq_rel);
}

}  // namespace tessera::cuda::attn

namespace tessera::cuda {
void register_attention_forward();  // attention_fwd.cu
}
