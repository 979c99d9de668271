// CPU batched GEMM behind ops/gemm_kernel.h: C[i] = alpha * A[i] @ B[i] + beta * C[i].
//   float32 / float64: cblas_sgemm / cblas_dgemm (OpenBLAS).
//   float16 / bfloat16: each batch's matrices are widened to float32 buffers, multiplied by sgemm
//                       (accumulating in float32) and rounded back once.
//   uint8 / int8 / int32 / int64: a loop accumulating in 64 bits, wrapping to the dtype as PyTorch.
//
// Operands reach BLAS without copies whenever a matrix is row-major or column-major with some leading
// dimension (contiguous, transposed, or sliced along the outer dim); only layouts BLAS cannot express
// (a step in the inner dim, broadcast rows) are copied, once per distinct matrix. A broadcast batch
// (batch stride 0) is never materialized.
//
// Threads: OpenBLAS always runs on one thread (Note [One thread pool] in kernels/cpu/blas.h). A batch
// of small matrices runs one matrix per OpenMP thread; large matrices run one after another, each cut
// over OpenMP's threads by gemm_threaded.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <climits>
#include <optional>
#include <vector>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/onednn/onednn.h"
#include "ops/gemm_kernel.h"
#include "tensor/tensor_impl.h"

namespace tessera::cpu::inline TS_CPU_ISA {  // Note [ISA namespaces]
namespace {

// A batch of GEMMs with m*n*k at or below this runs one matrix per OpenMP thread; larger ones are cut
// over the threads one after another (gemm_threaded does not cut them below kMinPieceWork anyway).
constexpr double kSmallGemm = 65536.0 * 4;

// A rows x cols matrix as BLAS sees it in row-major order: trans = stored column-major.
struct BlasLayout {
  bool trans;
  int64_t ld;
};

// Whether element strides (rs, cs) of a rows x cols matrix are expressible as a BLAS matrix. Size-1
// dims may carry any stride, so they never force a copy.
std::optional<BlasLayout> blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  const int64_t r1 = std::max<int64_t>(rows, 1), c1 = std::max<int64_t>(cols, 1);
  if (cs == 1 || cols <= 1) {
    int64_t ld = rows <= 1 ? c1 : rs;
    if (ld >= c1) return BlasLayout{false, ld};
  }
  if (rs == 1 || rows <= 1) {
    int64_t ld = cols <= 1 ? r1 : cs;
    if (ld >= r1) return BlasLayout{true, ld};
  }
  return std::nullopt;
}

// One operand of the batch: a base pointer, the batch stride in elements and the BLAS layout of each
// matrix. `keep` owns a contiguous copy when the original layout was not expressible.
struct Operand {
  const char* base;
  int64_t batch_stride;  // elements; 0 = one matrix shared by the batch
  BlasLayout layout;
  Tensor keep;
};

Operand prepare_operand(const Tensor& t) {
  const int64_t rows = t.size(1), cols = t.size(2);
  const int64_t bs = t.size(0) <= 1 ? 0 : t.stride(0);
  if (auto l = blas_layout(rows, cols, t.stride(1), t.stride(2)))
    return {static_cast<const char*>(t.data_ptr()), bs, *l, Tensor()};
  // Copy only the distinct matrices: a broadcast batch stays one matrix.
  Tensor c = bs == 0 ? t.select(0, 0).contiguous() : t.contiguous();
  return {static_cast<const char*>(c.data_ptr()), bs == 0 ? 0 : rows * cols, BlasLayout{false, std::max<int64_t>(cols, 1)}, c};
}

void check_blas_int(int64_t v, const char* what) {
  TS_CHECK(v <= INT_MAX, NotImplementedError, "matmul: ", what, " = ", v,
           " exceeds the 32-bit range of the CPU BLAS interface");
}

// c = beta * c over (batch, m, n) with any strides; beta == 0 writes zeros without reading c.
template <class T>
void scale_output(const Tensor& c, const Scalar& beta) {
  T* base = c.data_ptr<T>();
  const int64_t B = c.size(0), m = c.size(1), n = c.size(2);
  const int64_t s0 = c.stride(0), s1 = c.stride(1), s2 = c.stride(2);
  const bool zero = beta.to_double() == 0.0;
  const acc_t<T> bv = beta.to<acc_t<T>>();
#pragma omp parallel for collapse(2) if (B * m * n > 32768)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < m; ++i) {
      T* row = base + b * s0 + i * s1;
      for (int64_t j = 0; j < n; ++j)
        row[j * s2] = zero ? T(acc_t<T>(0)) : convert<T>(static_cast<acc_t<T>>(bv * static_cast<acc_t<T>>(row[j * s2])));
    }
}

// float32 / float64 through BLAS. `c` must be expressible as a BLAS matrix (the caller guarantees it).
template <class T>
void gemm_blas(const GemmParams& p, const Tensor& c) {
  const int64_t B = p.batch(), m = p.m(), n = p.n(), k = p.k();
  Operand A = prepare_operand(p.a), Bm = prepare_operand(p.b);
  BlasLayout cl = *blas_layout(m, n, c.stride(1), c.stride(2));
  for (int64_t v : {m, n, k, A.layout.ld, Bm.layout.ld, cl.ld}) check_blas_int(v, "a matrix dimension");
  // A column-major C is computed as the column-major product, which flips how A and B read; as a
  // row-major call that is C^T (n, m) = op(B)^T @ op(A)^T.
  const bool col_major = cl.trans;
  const bool ta = A.layout.trans != cl.trans, tb = Bm.layout.trans != cl.trans;
  const T alpha = p.alpha.to<T>(), beta = p.beta.to<T>();
  const T* a0 = reinterpret_cast<const T*>(A.base);
  const T* b0 = reinterpret_cast<const T*>(Bm.base);
  T* c0 = c.data_ptr<T>();
  const int64_t cs = c.stride(0);
  auto one = [&](int64_t i) {
    const T* ai = a0 + i * A.batch_stride;
    const T* bi = b0 + i * Bm.batch_stride;
    if (col_major) {
      gemm_threaded(tb, ta, n, m, k, alpha, bi, Bm.layout.ld, ai, A.layout.ld, beta, c0 + i * cs, cl.ld);
    } else {
      gemm_threaded(ta, tb, m, n, k, alpha, ai, A.layout.ld, bi, Bm.layout.ld, beta, c0 + i * cs, cl.ld);
    }
  };
  if (B > 1 && double(m) * double(n) * double(k) <= kSmallGemm) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < B; ++i) one(i);
  } else {
    for (int64_t i = 0; i < B; ++i) one(i);
  }
}

// Widens a rows x cols strided matrix into a dense row-major float buffer.
template <class T>
void widen(const T* src, int64_t rows, int64_t cols, int64_t rs, int64_t cs, float* dst) {
  for (int64_t i = 0; i < rows; ++i) {
    const T* s = src + i * rs;
    float* d = dst + i * cols;
    if (cs == 1) {
      for (int64_t j = 0; j < cols; ++j) d[j] = static_cast<float>(s[j]);
    } else {
      for (int64_t j = 0; j < cols; ++j) d[j] = static_cast<float>(s[j * cs]);
    }
  }
}

// float16 / bfloat16: one batch matrix at a time through float32 buffers; a broadcast operand is
// widened once for the whole batch.
template <class T>
void gemm_reduced(const GemmParams& p) {
  const int64_t B = p.batch(), m = p.m(), n = p.n(), k = p.k();
  for (int64_t v : {m, n, k}) check_blas_int(v, "a matrix dimension");
  const T* a0 = p.a.data_ptr<T>();
  const T* b0 = p.b.data_ptr<T>();
  T* c0 = p.c.data_ptr<T>();
  const int64_t as0 = B <= 1 ? 0 : p.a.stride(0), as1 = p.a.stride(1), as2 = p.a.stride(2);
  const int64_t bs0 = B <= 1 ? 0 : p.b.stride(0), bs1 = p.b.stride(1), bs2 = p.b.stride(2);
  const int64_t cs0 = p.c.stride(0), cs1 = p.c.stride(1), cs2 = p.c.stride(2);
  const float alpha = static_cast<float>(p.alpha.to_double()), beta = static_cast<float>(p.beta.to_double());
  const bool small = B > 1 && double(m) * double(n) * double(k) <= kSmallGemm;

  auto run = [&](int64_t lo, int64_t hi) {
    std::vector<float> fa(m * k), fb(k * n), fc(m * n);
    const T* last_a = nullptr;
    const T* last_b = nullptr;
    for (int64_t i = lo; i < hi; ++i) {
      const T* ai = a0 + i * as0;
      const T* bi = b0 + i * bs0;
      T* ci = c0 + i * cs0;
      if (ai != last_a) widen(ai, m, k, as1, as2, fa.data());
      if (bi != last_b) widen(bi, k, n, bs1, bs2, fb.data());
      last_a = ai;
      last_b = bi;
      if (beta != 0.0f) widen(ci, m, n, cs1, cs2, fc.data());
      gemm_threaded(false, false, m, n, k, alpha, fa.data(), k, fb.data(), n, beta, fc.data(), n);
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < n; ++j) ci[r * cs1 + j * cs2] = T(fc[r * n + j]);
    }
  };
  if (small) {
#pragma omp parallel
    {
      const int nt = omp_get_num_threads(), t = omp_get_thread_num();
      run(B * t / nt, B * (t + 1) / nt);
    }
  } else {
    run(0, B);
  }
}

// Integers: C = alpha * A @ B + beta * C accumulated in 64 bits. Unsigned arithmetic makes the
// overflow wrap (defined), which after the final narrowing equals PyTorch's wrapping int64 sum.
template <class T>
void gemm_integer(const GemmParams& p) {
  const int64_t B = p.batch(), m = p.m(), n = p.n(), k = p.k();
  const T* a0 = p.a.data_ptr<T>();
  const T* b0 = p.b.data_ptr<T>();
  T* c0 = p.c.data_ptr<T>();
  const int64_t as0 = B <= 1 ? 0 : p.a.stride(0), as1 = p.a.stride(1), as2 = p.a.stride(2);
  const int64_t bs0 = B <= 1 ? 0 : p.b.stride(0), bs1 = p.b.stride(1), bs2 = p.b.stride(2);
  const int64_t cs0 = p.c.stride(0), cs1 = p.c.stride(1), cs2 = p.c.stride(2);
  const uint64_t alpha = static_cast<uint64_t>(p.alpha.to_int()), beta = static_cast<uint64_t>(p.beta.to_int());
  // B of one batch widened to a dense k x n buffer so the inner loop is unit-stride and vectorizes.
  std::vector<uint64_t> wb(k * n);
  const T* last_b = nullptr;
  for (int64_t bi = 0; bi < B; ++bi) {
    const T* bp = b0 + bi * bs0;
    if (bp != last_b) {
#pragma omp parallel for if (k * n > 65536)
      for (int64_t r = 0; r < k; ++r)
        for (int64_t j = 0; j < n; ++j) wb[r * n + j] = static_cast<uint64_t>(static_cast<int64_t>(bp[r * bs1 + j * bs2]));
      last_b = bp;
    }
    const T* ap = a0 + bi * as0;
    T* cp = c0 + bi * cs0;
#pragma omp parallel if (m * n * k > 65536)
    {
      std::vector<uint64_t> acc(n);
#pragma omp for schedule(static)
      for (int64_t i = 0; i < m; ++i) {
        std::fill(acc.begin(), acc.end(), 0);
        for (int64_t r = 0; r < k; ++r) {
          const uint64_t av = static_cast<uint64_t>(static_cast<int64_t>(ap[i * as1 + r * as2]));
          if (av == 0) continue;
          const uint64_t* brow = wb.data() + r * n;
          for (int64_t j = 0; j < n; ++j) acc[j] += av * brow[j];
        }
        T* crow = cp + i * cs1;
        for (int64_t j = 0; j < n; ++j) {
          uint64_t v = alpha * acc[j];
          if (beta != 0) v += beta * static_cast<uint64_t>(static_cast<int64_t>(crow[j * cs2]));
          crow[j * cs2] = static_cast<T>(v);
        }
      }
    }
  }
}

void gemm_cpu(const GemmParams& p) {
  TS_CHECK(p.a.is_cpu() && p.b.is_cpu() && p.c.is_cpu(), DeviceError, "matmul: the CPU kernel got tensors on ",
           p.a.device().str(), ", ", p.b.device().str(), " and ", p.c.device().str());
  if (p.c.numel() == 0) return;
  // oneDNN first, for the products where it measured faster (Note [oneDNN where it wins] in
  // kernels/cpu/onednn/onednn.h); it takes the bias in its epilogue.
  if (onednn::gemm(p)) return;
  if (p.bias.defined()) return gemm_cpu(bias_as_input(p));  // BLAS adds C: the bias goes in as C
  const DType dt = p.c.dtype();
  if (p.k() == 0) {  // an empty sum: only the beta term remains
    dispatch_dtype<DTypeSet::AllNoBool>(dt, "matmul", [&]<class T>(TypeTag<T>) { scale_output<T>(p.c, p.beta); });
    return;
  }
  switch (dt) {
    case DType::Float32:
    case DType::Float64: {
      // BLAS writes C in place only when C is a BLAS matrix; otherwise through a dense temporary.
      Tensor c = p.c;
      const bool direct = blas_layout(p.m(), p.n(), c.stride(1), c.stride(2)).has_value() &&
                          (p.batch() <= 1 || c.stride(0) != 0);
      if (!direct) {
        c = make_empty(p.c.sizes(), dt, p.c.device());
        if (p.beta.to_double() != 0.0) c.copy_(p.c);
      }
      if (dt == DType::Float32) gemm_blas<float>(p, c);
      else gemm_blas<double>(p, c);
      if (!direct) Tensor(p.c).copy_(c);
      return;
    }
    case DType::Float16: return gemm_reduced<Half>(p);
    case DType::BFloat16: return gemm_reduced<BFloat16>(p);
    case DType::UInt8: return gemm_integer<uint8_t>(p);
    case DType::Int8: return gemm_integer<int8_t>(p);
    case DType::Int32: return gemm_integer<int32_t>(p);
    case DType::Int64: return gemm_integer<int64_t>(p);
    case DType::Bool: break;
  }
  throw_unsupported_dtype("matmul", dt);
}

}  // namespace

void register_linalg() { gemm_kernel.set(DeviceType::CPU, &gemm_cpu); }

}  // namespace tessera::cpu::TS_CPU_ISA
