// Floating-point batched GEMM through cuBLASLt (matmul_lt.h): the gemm slot's float16 / bfloat16 /
// float32 / float64 path and the fused bias + activation epilogue.
//
// Layouts. cuBLAS is column-major; tessera's (batch, m, n) views are row-major in spirit but may have
// any strides. A matrix with element strides (rs, cs) is a column-major matrix when rs == 1 (leading
// dim cs) and the transpose of one when cs == 1 (leading dim rs); size-1 dims may carry any stride.
// The product is set up on X, the column-major face of C:
//   C stored with unit column stride (the usual row-major C): X = C^T (n x m) = B^T A^T
//   C stored with unit row stride:                            X = C   (m x n) = A B
// and each operand reads in place with a transpose flag where its strides allow; one that no flag
// expresses (a step in both dims, a broadcast row) is copied dense first (once per distinct matrix: a
// broadcast batch stays a batch stride of 0). A C that no layout expresses is computed into a
// contiguous temporary and copied back.
//
// Types: float16 / bfloat16 multiply with CUBLAS_COMPUTE_32F (float accumulation, one rounding on
// store); float32 with CUBLAS_COMPUTE_32F, or CUBLAS_COMPUTE_32F_FAST_TF32 when cuda::allow_tf32();
// float64 with CUBLAS_COMPUTE_64F. Split-K reductions are held to the compute type (never the 16-bit
// output type), so a sum rounds once, as on the CPU.
//
// Host cost of an eager call: descriptors and the heuristic's algorithm are cached per problem key
// (device, types, transposes, sizes, leading dims, batch strides and pointer alignments) in a small
// per-thread LRU, so a repeated shape costs a hash lookup plus the cublasLtMatmul call. The workspace
// (at most 32 MiB, what the chosen algorithm asks for) comes from the caching allocator on the
// current stream.
#include "kernels/cuda/matmul_lt.h"

#include <cublasLt.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <list>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/cublas_handle.h"
#include "runtime/cuda/cuda_allocator.h"
#include "runtime/cuda/cuda_stream.h"
#include "tensor/tensor_impl.h"
#include "tessera/cuda.h"
#include "tessera/error.h"

namespace tessera::cuda {
namespace {

constexpr uint64_t kMaxWorkspace = uint64_t(32) << 20;
constexpr size_t kPlanCacheEntries = 512;
constexpr int64_t kMaxBatchPerCall = INT32_MAX;  // CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT is an int32

// A logical rows x cols operand as cuBLAS stores it: column-major `srows` x `scols` with leading dim
// ld; trans when the stored matrix is the operand's transpose.
struct ColMajor {
  bool trans;
  int64_t srows, scols, ld;
};

std::optional<ColMajor> col_major(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  const int64_t r1 = std::max<int64_t>(rows, 1), c1 = std::max<int64_t>(cols, 1);
  if (rs == 1 || rows <= 1) {
    const int64_t ld = cols <= 1 ? r1 : cs;
    if (ld >= r1) return ColMajor{false, rows, cols, ld};
  }
  if (cs == 1 || cols <= 1) {
    const int64_t ld = rows <= 1 ? c1 : rs;
    if (ld >= c1) return ColMajor{true, cols, rows, ld};
  }
  return std::nullopt;
}

// The operand of a 3-D view t (batch, r, c) as cuBLAS reads it, used as is or transposed.
std::optional<ColMajor> operand_layout(const Tensor& t, bool transposed) {
  return transposed ? col_major(t.size(2), t.size(1), t.stride(2), t.stride(1))
                    : col_major(t.size(1), t.size(2), t.stride(1), t.stride(2));
}

// A dense copy of a 3-D operand; a broadcast batch (stride 0) copies its one matrix only.
Tensor dense_operand(const Tensor& t) {
  if (t.size(0) > 1 && t.stride(0) == 0) return t.select(0, 0).contiguous().unsqueeze(0).expand(t.sizes());
  return t.contiguous();
}

uint32_t alignment_of(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && a % al != 0) al >>= 1;
  return al;
}

struct LtTypes {
  cudaDataType_t data, scale;
  cublasComputeType_t compute;
};

LtTypes lt_types(DType dt) {
  switch (dt) {
    case DType::Float16: return {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case DType::BFloat16: return {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case DType::Float32:
      return {CUDA_R_32F, CUDA_R_32F, allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F};
    case DType::Float64: return {CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F};
    default: break;
  }
  TS_THROW(DTypeError, "matmul: cuBLASLt takes float16, bfloat16, float32 and float64, got ", dtype_name(dt));
}

// Everything the descriptors and the heuristic's choice depend on. X (m x n) = op(P) op(Q).
struct LtKey {
  int device;
  int data, compute;
  uint32_t epilogue;
  bool trans_p, trans_q;
  int64_t m, n, k;
  int64_t ld_p, ld_q, ld_x;
  int64_t batch, stride_p, stride_q, stride_x;
  uint32_t align_p, align_q, align_x, align_bias;
  bool operator==(const LtKey&) const = default;
};

struct LtKeyHash {
  size_t operator()(const LtKey& k) const {
    size_t h = 0;
    auto mix = [&h](int64_t v) { h ^= std::hash<int64_t>{}(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    for (int64_t v : {int64_t(k.device), int64_t(k.data), int64_t(k.compute), int64_t(k.epilogue),
                      int64_t(k.trans_p), int64_t(k.trans_q), k.m, k.n, k.k, k.ld_p, k.ld_q, k.ld_x, k.batch,
                      k.stride_p, k.stride_q, k.stride_x, int64_t(k.align_p), int64_t(k.align_q),
                      int64_t(k.align_x), int64_t(k.align_bias)})
      mix(v);
    return h;
  }
};

// The cached descriptors and algorithm of one key. `found` is false when cuBLASLt offers no
// algorithm (the caller falls back or raises).
struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t p = nullptr, q = nullptr, x = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  bool found = false;

  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    if (x) (void)cublasLtMatrixLayoutDestroy(x);
    if (q) (void)cublasLtMatrixLayoutDestroy(q);
    if (p) (void)cublasLtMatrixLayoutDestroy(p);
    if (op) (void)cublasLtMatmulDescDestroy(op);
  }
};

class Preference {
 public:
  Preference() { TS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&p_)); }
  ~Preference() { (void)cublasLtMatmulPreferenceDestroy(p_); }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
  template <class V>
  void set(cublasLtMatmulPreferenceAttributes_t attr, V v) {
    TS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p_, attr, &v, sizeof(v)));
  }
  cublasLtMatmulPreference_t get() const { return p_; }

 private:
  cublasLtMatmulPreference_t p_ = nullptr;
};

template <class V>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, V v) {
  TS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)));
}

cublasLtMatrixLayout_t make_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                                   int64_t batch_stride) {
  cublasLtMatrixLayout_t l = nullptr;
  TS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    TS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    TS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride,
                                                     sizeof(batch_stride)));
  }
  return l;
}

bool uses_aux(uint32_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_GELU_AUX || epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS ||
         epilogue == CUBLASLT_EPILOGUE_DGELU || epilogue == CUBLASLT_EPILOGUE_DGELU_BGRAD;
}

// The epilogues of the fused linear-layer ops (gemm_gelu_aux, gemm_dgelu_bgrad, gemm_bgradb): their bias (or bias
// gradient) is in the data type, said explicitly, and a configuration cuBLASLt refuses with
// INVALID_VALUE counts as "no algorithm" (the caller computes the composite).
bool fused_layer_epilogue(uint32_t epilogue) { return uses_aux(epilogue) || epilogue == CUBLASLT_EPILOGUE_BGRADB; }

std::unique_ptr<LtPlan> make_plan(const LtKey& key, const LtTypes& t, const void* bias, const void* aux) {
  auto plan = std::make_unique<LtPlan>();
  TS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, t.compute, t.scale));
  set_desc(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, key.trans_p ? CUBLAS_OP_T : CUBLAS_OP_N);
  set_desc(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, key.trans_q ? CUBLAS_OP_T : CUBLAS_OP_N);
  if (key.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    set_desc(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<cublasLtEpilogue_t>(key.epilogue));
    if (bias) {
      // The heuristic reads the bias pointer's alignment; each call sets its own pointer again.
      set_desc(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
      set_desc(plan->op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, int64_t(0));  // one bias for the batch
      if (fused_layer_epilogue(key.epilogue))
        set_desc(plan->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(t.data));
    }
    if (aux && uses_aux(key.epilogue)) {
      // The pre-activation, laid out as X (ld_x); each call sets its own pointer again.
      set_desc(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, aux);
      set_desc(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, key.ld_x);
    }
  }
  // Stored dims: an operand read transposed is stored as its transpose.
  plan->p = make_layout(t.data, key.trans_p ? key.k : key.m, key.trans_p ? key.m : key.k, key.ld_p, key.batch,
                        key.stride_p);
  plan->q = make_layout(t.data, key.trans_q ? key.n : key.k, key.trans_q ? key.k : key.n, key.ld_q, key.batch,
                        key.stride_q);
  plan->x = make_layout(t.data, key.m, key.n, key.ld_x, key.batch, key.stride_x);

  Preference pref;
  pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kMaxWorkspace);
  pref.set(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
           uint32_t(CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_p);
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_q);
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_x);
  pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_x);

  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(cublaslt_handle(), plan->op, plan->p, plan->q, plan->x,
                                                           plan->x, pref.get(), 1, &result, &count);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && count == 0)) return plan;
  if (st == CUBLAS_STATUS_INVALID_VALUE &&
      (fused_layer_epilogue(key.epilogue) || key.epilogue == CUBLASLT_EPILOGUE_BIAS))
    return plan;
  TS_CUBLAS_CHECK(st);
  plan->algo = result.algo;
  plan->workspace = result.workspaceSize;
  plan->found = true;
  return plan;
}

// Per-thread LRU of plans (descriptors are host objects; a thread-private cache needs no lock).
class PlanCache {
 public:
  LtPlan* get(const LtKey& key, const LtTypes& t, const void* bias, const void* aux) {
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second.get();
    }
    lru_.emplace_front(key, make_plan(key, t, bias, aux));
    index_[key] = lru_.begin();
    if (lru_.size() > kPlanCacheEntries) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
    return lru_.front().second.get();
  }

 private:
  using Entry = std::pair<LtKey, std::unique_ptr<LtPlan>>;
  std::list<Entry> lru_;
  std::unordered_map<LtKey, std::list<Entry>::iterator, LtKeyHash> index_;
};

thread_local PlanCache t_plans;

int64_t batch_stride(const Tensor& t) { return t.size(0) <= 1 ? 0 : t.stride(0); }

// X = alpha op(P) op(Q) + beta X with `epilogue` over the 3-D views a (B, m, k), b (B, k, n) and
// c (B, m, n); c must be expressible (col_major of its last two dims, and for an epilogue with a bias,
// X = C^T so that the bias runs along C's columns). Returns false, having run nothing, when cuBLASLt
// offers no algorithm.
// aux: the epilogue's auxiliary buffer, laid out as c (GELU_AUX*: the pre-activation, written; DGELU*:
// the pre-activation, read), or null. For the BGRAD epilogues `bias` is the bias gradient, written.
bool lt_matmul(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta,
               cublasLtEpilogue_t epilogue, const Tensor& bias, void* aux = nullptr) {
  const int64_t B = c.size(0), m = c.size(1), n = c.size(2), k = a.size(2);
  const std::optional<ColMajor> xl = col_major(m, n, c.stride(1), c.stride(2));
  TS_CHECK(xl.has_value(), ValueError, "matmul: internal error: the result's strides ", c.strides(),
           " are not a cuBLAS layout");
  const bool xt = xl->trans;  // X = C^T = B^T A^T; otherwise X = C = A B
  Tensor pt = xt ? b : a, qt = xt ? a : b;
  std::optional<ColMajor> pl = operand_layout(pt, xt), ql = operand_layout(qt, xt);
  if (!pl) {
    pt = dense_operand(pt);
    pl = operand_layout(pt, xt);
  }
  if (!ql) {
    qt = dense_operand(qt);
    ql = operand_layout(qt, xt);
  }
  const LtTypes types = lt_types(c.dtype());
  const int64_t es = static_cast<int64_t>(c.element_size());
  const int64_t sp = batch_stride(pt), sq = batch_stride(qt), sx = B <= 1 ? 0 : c.stride(0);
  const char* p0 = static_cast<const char*>(pt.data_ptr());
  const char* q0 = static_cast<const char*>(qt.data_ptr());
  char* x0 = static_cast<char*>(c.data_ptr());
  const void* bias_ptr = bias.defined() ? bias.data_ptr() : nullptr;

  // Every batch chunk's plan first, so that nothing runs unless all of them have an algorithm.
  struct Chunk {
    LtPlan* plan;
    const char* p;
    const char* q;
    char* x;
  };
  std::vector<Chunk> chunks;
  for (int64_t b0 = 0; b0 < B; b0 += kMaxBatchPerCall) {
    const int64_t nb = std::min(B - b0, kMaxBatchPerCall);
    Chunk ch{nullptr, p0 + b0 * sp * es, q0 + b0 * sq * es, x0 + b0 * sx * es};
    LtKey key{};
    key.device = c.device().index();
    key.data = static_cast<int>(types.data);
    key.compute = static_cast<int>(types.compute);
    key.epilogue = static_cast<uint32_t>(epilogue);
    key.trans_p = pl->trans;
    key.trans_q = ql->trans;
    key.m = xt ? n : m;
    key.n = xt ? m : n;
    key.k = k;
    key.ld_p = pl->ld;
    key.ld_q = ql->ld;
    key.ld_x = xl->ld;
    key.batch = nb;
    key.stride_p = sp;
    key.stride_q = sq;
    key.stride_x = sx;
    key.align_p = alignment_of(ch.p);
    key.align_q = alignment_of(ch.q);
    key.align_x = alignment_of(ch.x);
    key.align_bias = bias_ptr ? alignment_of(bias_ptr) : 0;
    ch.plan = t_plans.get(key, types, bias_ptr, aux);
    if (!ch.plan->found) return false;
    chunks.push_back(ch);
  }

  const float alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
  const bool dbl = types.scale == CUDA_R_64F;
  const void* alpha_p = dbl ? static_cast<const void*>(&alpha) : static_cast<const void*>(&alpha_f);
  const void* beta_p = dbl ? static_cast<const void*>(&beta) : static_cast<const void*>(&beta_f);
  cublasLtHandle_t handle = cublaslt_handle();
  cudaStream_t stream = current_raw_stream(c.device().index());
  for (const Chunk& ch : chunks) {
    if (bias_ptr) set_desc(ch.plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias_ptr);
    if (aux) set_desc(ch.plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, static_cast<const void*>(aux));
    DataPtr ws;
    if (ch.plan->workspace > 0) ws = allocate_workspace(ch.plan->workspace);
    // beta == 0: cuBLASLt does not read C (NaN in it does not reach the result).
    TS_CUBLAS_CHECK(cublasLtMatmul(handle, ch.plan->op, alpha_p, ch.p, ch.plan->p, ch.q, ch.plan->q, beta_p, ch.x,
                                   ch.plan->x, ch.x, ch.plan->x, &ch.plan->algo, ws.get(), ch.plan->workspace,
                                   stream));
  }
  return true;
}

// Whether cuBLASLt can write c in place: a column-major face, batches at distinct addresses, and
// (for a bias epilogue) unit stride along n, so that X = C^T.
bool writable_in_place(const Tensor& c, bool need_row_major) {
  const std::optional<ColMajor> l = col_major(c.size(1), c.size(2), c.stride(1), c.stride(2));
  if (!l || (need_row_major && !l->trans)) return false;
  return c.size(0) <= 1 || c.stride(0) != 0;
}

cublasLtEpilogue_t epilogue_for(Activation act, bool bias) {
  switch (act) {
    case Activation::None: return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    case Activation::Relu: return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case Activation::Gelu: return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// Note [Aligned GEMM staging]: cuBLASLt runs a product on its fast Hopper kernels only when every
// matrix's base address and leading dim are 16-byte aligned and M, N and K are whole numbers of
// 16-byte vectors; otherwise it falls back to old kernels (sm_75 CUTLASS tiles, ~100-130 TFLOP/s in
// bfloat16 on an H200 against ~700). GPT-2's V = 50257 classes make all three classifier products
// such. So a large product is staged: each matrix that is misaligned or has a ragged dim is copied
// into a buffer padded to 16 bytes in both dims (zeros in the pad: the padded K adds 0 * 0 terms),
// and a staged result is computed into one and its [0, M) x [0, N) part copied back. Each staged
// matrix is moved twice through memory (~350 flops' worth per byte at ~700 TFLOP/s and ~4 TB/s), and
// the fallback loses about 0.8 of the product's time, so staging runs when the product does at least
// kStageFlopsPerByte flops per byte of the matrices it stages.
constexpr double kStageFlopsPerByte = 512;

int64_t round_up(int64_t x, int64_t step) { return (x + step - 1) / step * step; }

// Whether the matrix of a 3-D view t (batch, r, c) has a misaligned base, leading dim or batch stride.
bool misaligned(const Tensor& t) {
  const int64_t es = static_cast<int64_t>(t.element_size());
  if (t.numel() == 0) return false;
  const std::optional<ColMajor> l = col_major(t.size(1), t.size(2), t.stride(1), t.stride(2));
  const bool batched = t.size(0) > 1 && t.stride(0) != 0;
  return !l || alignment_of(t.data_ptr()) < 16 || (l->ld * es) % 16 != 0 ||
         (batched && (t.stride(0) * es) % 16 != 0);
}

// A buffer for t (batch, r, c) padded to (batch, rp, cp), stored as t is (rows or columns contiguous),
// with the pad zeroed; returns the padded view. A broadcast batch (stride 0) stays one matrix,
// expanded. `copy`: t's values are copied in.
Tensor padded_like(const Tensor& t, int64_t rp, int64_t cp, bool copy) {
  const int64_t B = t.size(0), r = t.size(1), c = t.size(2);
  const bool bcast = B > 1 && t.stride(0) == 0;
  const int64_t nb = bcast ? 1 : B;
  const bool cols = t.stride(1) == 1 && t.stride(2) != 1 && r > 1;  // column-major storage stays so
  Tensor v = cols ? make_empty({nb, cp, rp}, t.dtype(), t.device()).transpose(1, 2)
                  : make_empty({nb, rp, cp}, t.dtype(), t.device());
  if (rp > r) v.narrow(1, r, rp - r).zero_();
  if (cp > c) v.narrow(2, c, cp - c).zero_();
  if (copy) v.narrow(1, 0, r).narrow(2, 0, c).copy_(bcast ? t.narrow(0, 0, 1) : t);
  return bcast ? v.expand({B, rp, cp}) : v;
}

// The staged product (Note [Aligned GEMM staging]), or false where staging does not pay.
bool gemm_staged(const GemmParams& p, double beta) {
  const int64_t es = static_cast<int64_t>(p.c.element_size());
  if (16 % es != 0 || p.c.numel() == 0 || p.k() == 0) return false;
  const int64_t step = 16 / es;
  const int64_t B = p.batch(), m = p.m(), n = p.n(), k = p.k();
  const int64_t mp = round_up(m, step), np = round_up(n, step), kp = round_up(k, step);
  const bool sa = misaligned(p.a) || mp != m || kp != k;
  const bool sb = misaligned(p.b) || kp != k || np != n;
  const bool sc = misaligned(p.c) || mp != m || np != n;
  if (!sa && !sb && !sc) return false;
  auto matrices = [](const Tensor& t) { return t.size(0) > 1 && t.stride(0) == 0 ? 1.0 : static_cast<double>(t.size(0)); };
  const double bytes = static_cast<double>(es) * ((sa ? matrices(p.a) * static_cast<double>(mp * kp) : 0.0) +
                                                  (sb ? matrices(p.b) * static_cast<double>(kp * np) : 0.0) +
                                                  (sc ? static_cast<double>(B * mp * np) : 0.0));
  const double flops = 2.0 * static_cast<double>(B) * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (flops < kStageFlopsPerByte * bytes) return false;
  const Tensor a = sa ? padded_like(p.a, mp, kp, true) : p.a;
  const Tensor b = sb ? padded_like(p.b, kp, np, true) : p.b;
  if (!sc) {
    gemm_lt(GemmParams{a, b, p.c, p.alpha, p.beta});
    return true;
  }
  const Tensor c = padded_like(p.c, mp, np, beta != 0.0);
  gemm_lt(GemmParams{a, b, c, p.alpha, p.beta});
  Tensor(p.c).copy_(c.narrow(1, 0, m).narrow(2, 0, n));
  return true;
}

// C = alpha A B + bias through cuBLASLt's BIAS epilogue (ops/gemm_kernel.h), or false where the
// product is not one the epilogue takes as it is: one matrix, C written in place as X = C^T, every
// matrix and the bias 16-byte aligned with whole 16-byte vectors along m, n and k (no staging).
bool gemm_bias_epilogue(const GemmParams& p) {
  const int64_t step = 16 / static_cast<int64_t>(p.c.element_size());
  if (p.bias.dim() != 1 || p.bias.size(0) != p.n() || p.beta.to_double() != 0.0) return false;
  if (p.batch() != 1 || p.m() % step != 0 || p.n() % step != 0 || p.k() % step != 0) return false;
  if (misaligned(p.a) || misaligned(p.b) || misaligned(p.c) || !writable_in_place(p.c, true)) return false;
  const Tensor bias = p.bias.contiguous();
  if (alignment_of(bias.data_ptr()) < 16) return false;
  return lt_matmul(p.a, p.b, p.c, p.alpha.to_double(), 0.0, CUBLASLT_EPILOGUE_BIAS, bias);
}

}  // namespace

void gemm_lt(const GemmParams& p) {
  if (p.bias.defined()) {
    if (gemm_bias_epilogue(p)) return;
    gemm_lt(bias_as_input(p));
    return;
  }
  const double alpha = p.alpha.to_double(), beta = p.beta.to_double();
  if (gemm_staged(p, beta)) return;
  const Tensor& c = p.c;
  if (writable_in_place(c, false)) {
    const bool ok = lt_matmul(p.a, p.b, c, alpha, beta, CUBLASLT_EPILOGUE_DEFAULT, Tensor());
    TS_CHECK(ok, NotImplementedError, "matmul: cuBLASLt has no algorithm for a ", p.a.sizes(), " @ ", p.b.sizes(),
             " product in ", dtype_name(c.dtype()));
    return;
  }
  Tensor tmp = make_empty(c.sizes(), c.dtype(), c.device());
  if (beta != 0.0) tmp.copy_(c);
  const bool ok = lt_matmul(p.a, p.b, tmp, alpha, beta, CUBLASLT_EPILOGUE_DEFAULT, Tensor());
  TS_CHECK(ok, NotImplementedError, "matmul: cuBLASLt has no algorithm for a ", p.a.sizes(), " @ ", p.b.sizes(),
           " product in ", dtype_name(c.dtype()));
  Tensor(c).copy_(tmp);
}

void gemm_bias_act(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias, Activation act) {
  const char* op = "gemm_bias_act";
  TS_CHECK(out.defined() && a.defined() && b.defined(), ValueError, op, ": out, a and b must be defined");
  for (const Tensor* t : {&a, &b, &bias}) {
    if (!t->defined()) continue;
    TS_CHECK(t->device() == out.device(), DeviceError, op, ": expected all tensors on ", out.device().str(),
             ", got one on ", t->device().str());
    TS_CHECK(t->dtype() == out.dtype(), DTypeError, op, ": expected all tensors of dtype ", dtype_name(out.dtype()),
             ", got ", dtype_name(t->dtype()));
  }
  TS_CHECK(out.is_cuda(), DeviceError, op, ": expected CUDA tensors, got ", out.device().str());
  TS_CHECK(is_floating_point(out.dtype()), DTypeError, op, ": expected a floating dtype, got ",
           dtype_name(out.dtype()));
  const int64_t d = out.dim();
  TS_CHECK((d == 2 || d == 3) && a.dim() == d && b.dim() == d, ShapeError, op,
           ": expected a, b and out all 2-D or all 3-D, got ", a.sizes(), ", ", b.sizes(), " and ", out.sizes());
  Tensor a3 = d == 2 ? a.unsqueeze(0) : a, b3 = d == 2 ? b.unsqueeze(0) : b, c3 = d == 2 ? out.unsqueeze(0) : out;
  const int64_t B = c3.size(0), m = c3.size(1), n = c3.size(2), k = a3.size(2);
  TS_CHECK(a3.size(0) == B && b3.size(0) == B && a3.size(1) == m && b3.size(1) == k && b3.size(2) == n, ShapeError,
           op, ": a ", a.sizes(), " @ b ", b.sizes(), " does not give out ", out.sizes());
  if (bias.defined())
    TS_CHECK(bias.dim() == 1 && bias.size(0) == n, ShapeError, op, ": expected a bias of size (", n, "), got ",
             bias.sizes());
  if (c3.numel() == 0) return;
  CurrentDevice guard(out.device().index());

  if (k > 0) {
    Tensor target = writable_in_place(c3, true) ? c3 : make_empty(c3.sizes(), c3.dtype(), c3.device());
    Tensor bias_c = bias.defined() ? bias.contiguous() : Tensor();
    // The bias runs along X's rows only where X = C^T: a single row or column (m or n == 1) is
    // stored as X = C, and takes the unfused path.
    const bool fusable = !bias.defined() || writable_in_place(target, true);
    if (fusable && lt_matmul(a3, b3, target, 1.0, 0.0, epilogue_for(act, bias.defined()), bias_c)) {
      if (!target.is_same(c3)) c3.copy_(target);
      return;
    }
    gemm_lt(GemmParams{a3, b3, c3, 1, 0});
  } else {
    c3.zero_();
  }
  // Unfused: the same result in three steps (each rounding once).
  if (bias.defined()) c3.add_(bias);
  if (act == Activation::Relu) c3.relu_();
  if (act == Activation::Gelu) c3.copy_(c3.gelu("tanh"));
}

namespace {

// The checks shared by the 2-D epilogue entries: CUDA, one floating dtype, c = a @ b shapes.
void check_2d(const char* op, const Tensor& c, const Tensor& a, const Tensor& b,
              std::initializer_list<const Tensor*> more) {
  TS_CHECK(c.defined() && a.defined() && b.defined(), ValueError, op, ": c, a and b must be defined");
  TS_CHECK(c.is_cuda(), DeviceError, op, ": expected CUDA tensors, got ", c.device().str());
  TS_CHECK(is_floating_point(c.dtype()), DTypeError, op, ": expected a floating dtype, got ", dtype_name(c.dtype()));
  for (const Tensor* t : {&a, &b}) {
    TS_CHECK(t->device() == c.device(), DeviceError, op, ": expected all tensors on ", c.device().str(),
             ", got one on ", t->device().str());
    TS_CHECK(t->dtype() == c.dtype(), DTypeError, op, ": expected all tensors of dtype ", dtype_name(c.dtype()),
             ", got ", dtype_name(t->dtype()));
  }
  for (const Tensor* t : more) {
    if (!t->defined()) continue;
    TS_CHECK(t->device() == c.device() && t->dtype() == c.dtype(), DTypeError, op,
             ": expected every tensor on ", c.device().str(), " in ", dtype_name(c.dtype()));
  }
  TS_CHECK(c.dim() == 2 && a.dim() == 2 && b.dim() == 2 && a.size(0) == c.size(0) && b.size(1) == c.size(1) &&
               a.size(1) == b.size(0),
           ShapeError, op, ": a ", a.sizes(), " @ b ", b.sizes(), " does not give c ", c.sizes());
}

bool contiguous_rows(const Tensor& t) { return t.dim() == 2 && t.stride(1) == 1 && t.stride(0) == t.size(1); }

}  // namespace

bool gemm_gelu_aux(const Tensor& out, const Tensor& pre, const Tensor& a, const Tensor& b, const Tensor& bias) {
  const char* op = "linear_gelu";
  check_2d(op, out, a, b, {&pre, &bias});
  TS_CHECK(pre.sizes() == out.sizes(), ShapeError, op, ": expected pre of size ", out.sizes(), ", got ", pre.sizes());
  const int64_t n = out.size(1);
  if (bias.defined())
    TS_CHECK(bias.dim() == 1 && bias.size(0) == n, ShapeError, op, ": expected a bias of size (", n, "), got ",
             bias.sizes());
  // X = out^T (n x m, ld n): the bias runs along X's rows; the aux buffer shares X's layout. cuBLASLt
  // wants the aux leading dim a multiple of 8 and 16-byte aligned buffers; anything else falls back.
  // At least 2 x 2, so that X is out^T (a single row or column has both layouts).
  if (!contiguous_rows(out) || !contiguous_rows(pre) || n % 8 != 0 || out.size(0) < 2 || a.size(1) == 0)
    return false;
  if (alignment_of(out.data_ptr()) < 16 || alignment_of(pre.data_ptr()) < 16) return false;
  CurrentDevice guard(out.device().index());
  Tensor bias_c = bias.defined() ? bias.contiguous() : Tensor();
  const cublasLtEpilogue_t ep = bias.defined() ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
  return lt_matmul(a.unsqueeze(0), b.unsqueeze(0), out.unsqueeze(0), 1.0, 0.0, ep, bias_c, pre.data_ptr());
}

bool gemm_dgelu_bgrad(const Tensor& dpre, const Tensor& dbias, const Tensor& a, const Tensor& b, const Tensor& pre) {
  const char* op = "linear_dgelu_bgrad";
  check_2d(op, dpre, a, b, {&pre, &dbias});
  TS_CHECK(pre.sizes() == dpre.sizes(), ShapeError, op, ": expected pre of size ", dpre.sizes(), ", got ", pre.sizes());
  const int64_t n = dpre.size(1);
  if (dbias.defined())
    TS_CHECK(dbias.dim() == 1 && dbias.size(0) == n, ShapeError, op, ": expected a bias gradient of size (", n,
             "), got ", dbias.sizes());
  // X = dpre^T (n x m, ld n): the bias gradient runs along X's rows (reduced over m); the aux input shares
  // X's layout (ld a multiple of 8). At least 2 x 2 so that X is dpre^T.
  if (!contiguous_rows(dpre) || !contiguous_rows(pre) || n % 8 != 0 || dpre.size(0) < 2 || a.size(1) == 0)
    return false;
  if (alignment_of(dpre.data_ptr()) < 16 || alignment_of(pre.data_ptr()) < 16) return false;
  if (dbias.defined() && (!dbias.is_contiguous() || alignment_of(dbias.data_ptr()) < 16)) return false;
  CurrentDevice guard(dpre.device().index());
  const cublasLtEpilogue_t ep = dbias.defined() ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DGELU;
  return lt_matmul(a.unsqueeze(0), b.unsqueeze(0), dpre.unsqueeze(0), 1.0, 0.0, ep, dbias,
                   const_cast<void*>(pre.data_ptr()));
}

bool gemm_bgradb(const Tensor& c, const Tensor& bgrad, const Tensor& a, const Tensor& b) {
  const char* op = "linear_backward";
  check_2d(op, c, a, b, {&bgrad});
  TS_CHECK(bgrad.dim() == 1 && bgrad.size(0) == c.size(0), ShapeError, op, ": expected a bias gradient of size (",
           c.size(0), "), got ", bgrad.sizes());
  // X = c^T = b^T a^T: the bias gradient runs along X's columns and reduces op(Q) = a^T over k.
  // At least 2 x 2, so that X is c^T (a single row or column has both layouts).
  if (!contiguous_rows(c) || !bgrad.is_contiguous() || c.size(0) < 2 || c.size(1) < 2 || a.size(1) == 0) return false;
  if (alignment_of(bgrad.data_ptr()) < 16) return false;
  CurrentDevice guard(c.device().index());
  return lt_matmul(a.unsqueeze(0), b.unsqueeze(0), c.unsqueeze(0), 1.0, 0.0, CUBLASLT_EPILOGUE_BGRADB, bgrad);
}

}  // namespace tessera::cuda
