// OpenBLAS GEMM for the CPU kernels (matmul, conv): row-major calls, and large products spread over
// OpenMP threads.
//
// Note [One thread pool]: the OpenBLAS here runs its own pthreads (libopenblasp), which after each
// call spin (yielding) for a while waiting for the next one; OpenMP's threads likewise spin between
// parallel regions. With both pools on the same cores each steals the other's: a training step that
// alternates GEMMs with elementwise, pooling and conv kernels ran on 2 threads up to 4x slower than on
// one (the MLP step: 5 ms on 1 thread, 13 to 26 ms on 2). So OpenBLAS is kept on one thread
// (register_threads, set_num_threads) and tessera spreads a large GEMM over OpenMP's threads itself:
// gemm_threaded cuts C into one piece per thread, each a single-threaded GEMM.
//
// Determinism: a product is cut only where every piece does at least kMinPieceWork multiply-adds,
// above the sizes at which OpenBLAS 0.3 on x86-64 switches to its small-matrix (m*n*k <= 100^3) or
// direct (sgemm, m*n*k < 28*512*512) kernels, so the pieces and the uncut product run the same blocked
// kernel. That kernel's sum for an element runs over k in blocks fixed by k alone, but its edge
// tiles may sum in another order than full tiles (dgemm's do, for a tile of 12 rows of C): so cuts fall
// on multiples of kRowAlign rows, and columns are cut only in sgemm (whose tiles gave the same bits
// for any cut tried). The uncut product and every cut then give the same bits, so results do not
// depend on the thread count (checked for both cuts in tests/ops/test_matmul.cpp). OpenBLAS's own
// threads did not have this property: their split gave other bits on 2 threads than on 1 for most
// shapes.
#pragma once
#include "kernels/cpu/isa_namespace.h"
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace tessera::cpu {
TS_CPU_ISA_BEGIN  // Note [ISA namespaces] in kernels/cpu/isa_namespace.h

// C (m, n) = alpha * op(A) (m, k) @ op(B) (k, n) + beta * C, all row-major, on the calling thread.
inline void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                      const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
              alpha, a, int(std::max<int64_t>(lda, 1)), b, int(std::max<int64_t>(ldb, 1)), beta, c,
              int(std::max<int64_t>(ldc, 1)));
}
inline void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
                      const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
              alpha, a, int(std::max<int64_t>(lda, 1)), b, int(std::max<int64_t>(ldb, 1)), beta, c,
              int(std::max<int64_t>(ldc, 1)));
}

// Note [One thread pool]: the least work of a piece (a GEMM of 8M multiply-adds takes ~0.1 ms on one
// core), and the granularity of a cut of rows (of columns) of C, a multiple of the kernels' tiles.
constexpr double kMinPieceWork = 8.0 * 1024 * 1024;
constexpr int64_t kRowAlign = 48;
constexpr int64_t kColAlign = 16;

// blas_gemm spread over OpenMP's threads (one piece per thread) when not already inside a parallel
// region and the product is large enough; see Note [One thread pool].
template <class T>
void gemm_threaded(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
                   int64_t ldb, T beta, T* c, int64_t ldc) {
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  // Cut the rows of C, unless it is much wider than tall (sgemm only): every piece then reads op(A)
  // whole, the smaller operand (OpenBLAS repacks op(B) per block of rows anyway, so a cut of the rows
  // costs it least).
  const bool cut_n = std::is_same_v<T, float> && n >= 2 * m;
  const int64_t dim = cut_n ? n : m, other = cut_n ? m : n, align = cut_n ? kColAlign : kRowAlign;
  const double per_unit = double(other) * double(k);  // work per row (or column) of the cut dim
  int64_t pieces = std::min<int64_t>(threads, dim / align);
  int64_t step = 0;
  for (; pieces > 1; --pieces) {  // the last piece is the smallest; it too must reach kMinPieceWork
    step = (dim + pieces - 1) / pieces;
    step = (step + align - 1) / align * align;
    const int64_t last = dim - (pieces - 1) * step;
    if (last > 0 && double(last) * per_unit >= kMinPieceWork) break;
  }
  if (pieces <= 1) {
    blas_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
#pragma omp parallel for schedule(static, 1) num_threads(int(pieces))
  for (int64_t p = 0; p < pieces; ++p) {
    const int64_t lo = p * step, len = std::min(step, dim - lo);
    if (cut_n) {  // columns lo .. lo + len of op(B) and C
      blas_gemm(ta, tb, m, len, k, alpha, a, lda, tb ? b + lo * ldb : b + lo, ldb, beta, c + lo, ldc);
    } else {      // rows lo .. lo + len of op(A) and C
      blas_gemm(ta, tb, len, n, k, alpha, ta ? a + lo : a + lo * lda, lda, b, ldb, beta, c + lo * ldc, ldc);
    }
  }
}

TS_CPU_ISA_END
}  // namespace tessera::cpu
