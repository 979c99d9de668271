// Scaled-dot-product attention through cuDNN's fused flash attention engines (attention_cudnn.h).
//
// cuDNN runs attention as one fused kernel (on sm_90 its "fort" flash kernels with wgmma and TMA)
// when it recognizes the operation graph: the forward and backward graphs below are the ones its
// Scaled Dot-Product Attention support describes (the graphs cuDNN's own frontend builds for sdpa
// and sdpa_backward with a causal mask, a scale, no bias and no dropout). Note [cuDNN attention graph].
//
// Tensors (Note [Flash attention layout]): q (B, H, L, D), k, v (B, H, S, D), out / dout / dq / dk /
// dv with their own strides (last dim contiguous), lse as cuDNN's Stats (B, H, L, 1) float.
// Plans are built once per case (shapes, strides, dtype, scale, causal, determinism, device) and
// cached with their verdict: building one runs cuDNN's heuristics and may compile a kernel
// (tens of milliseconds), so it never happens inside a CUDA graph capture.
#include "kernels/cuda/attention_cudnn.h"

#include <cudnn.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "kernels/cuda/cudnn_graph.h"
#include "kernels/cuda/cudnn_handle.h"
#include "runtime/cuda/cuda_allocator.h"
#include "runtime/cuda/cuda_stream.h"
#include "tessera/cuda.h"
#include "tessera/determinism.h"
#include "tessera/error.h"

namespace tessera::cuda {
namespace {

// Unique ids of the graphs' real tensors and by-value scalars (the variant pack's keys).
enum Uid : int64_t {
  kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV, kScale, kNegInf, kOne, kSoftmaxSum, kDqAccum,
};

std::atomic<int64_t> g_runs{0};
std::mutex g_failure_mutex;
std::string g_last_failure;

void note_failure(std::string why) {
  std::lock_guard<std::mutex> lock(g_failure_mutex);
  g_last_failure = std::move(why);
}

// (B, H, N, D) dims and strides of a (B, H, N, D) tensor.
std::vector<int64_t> dims4(const Tensor& t) { return {t.size(0), t.size(1), t.size(2), t.size(3)}; }
std::vector<int64_t> strides4(const Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)}; }

CudnnTensorSpec real(int64_t uid, cudnnDataType_t dtype, std::vector<int64_t> dims, std::vector<int64_t> strides) {
  CudnnTensorSpec s;
  s.uid = uid;
  s.dtype = dtype;
  s.dims = std::move(dims);
  s.strides = std::move(strides);
  return s;
}

CudnnTensorSpec scalar(int64_t uid) {
  CudnnTensorSpec s;
  s.uid = uid;
  s.dtype = CUDNN_DATA_FLOAT;
  s.dims = {1, 1, 1, 1};
  s.strides = {1, 1, 1, 1};
  s.by_value = true;
  return s;
}

// The case a plan is for.
// Plans are per thread (the thread's cuDNN handle builds and runs them: cuDNN does not promise that an
// execution plan may run on two threads at once); the scale is a by-value input, not part of the graph.
struct Key {
  bool backward = false;
  std::thread::id thread;
  int device = 0;
  int dtype = 0;
  bool causal = false, deterministic = false, benchmark = false;
  std::vector<int64_t> shape;    // B, H, L, S, D
  std::vector<int64_t> strides;  // every tensor's (B, H, N) strides, in argument order
  bool operator<(const Key& o) const {
    return std::tie(backward, thread, device, dtype, causal, deterministic, benchmark, shape, strides) <
           std::tie(o.backward, o.thread, o.device, o.dtype, o.causal, o.deterministic, o.benchmark, o.shape,
                    o.strides);
  }
};

// At most this many cases get a plan; later new cases take tessera's kernels (each plan holds cuDNN
// state, and a workload with ever-new shapes would otherwise build plans without end).
constexpr size_t kMaxPlans = 1024;

struct Entry {
  std::unique_ptr<CudnnPlan> plan;  // null: cuDNN declined the case
};

std::mutex g_cache_mutex;
std::map<Key, std::shared_ptr<const Entry>> g_cache;

Key make_key(bool backward, const AttentionParams& p, DType dtype, std::initializer_list<const Tensor*> tensors) {
  Key k;
  k.backward = backward;
  k.thread = std::this_thread::get_id();
  k.device = tensors.begin()[0]->device().index();
  k.dtype = static_cast<int>(dtype);
  k.causal = p.causal;
  k.deterministic = backward && is_deterministic();
  k.benchmark = cudnn_benchmark();
  k.shape = {p.batch, p.heads, p.q_len, p.kv_len, p.head_dim};
  for (const Tensor* t : tensors)
    for (int d = 0; d < 3; ++d) k.strides.push_back(t->stride(d));
  return k;
}

// Whether the case is one cuDNN's attention engines may take at all (checked before any graph): the
// switches, the dtype, head dims up to 128 in multiples of 8, a cuDNN version without known problems,
// at least 64 queries, 16-byte aligned tensors, sizes below 2^31 elements, compute capability 8.0+.
bool eligible(DType dtype, const AttentionParams& p, std::initializer_list<const Tensor*> tensors) {
  if (!cudnn_sdp_enabled() || !flash_sdp_enabled()) return false;
  if (dtype != kFloat16 && dtype != kBFloat16) return false;
  if (p.head_dim % 8 != 0 || p.head_dim > 128) return false;
  // cuDNN before 9.6 wants the backward's dQ accumulator zeroed by the caller, and 9.10.0 / 9.10.1
  // have known bugs in 16-bit attention (its frontend refuses them): those take tessera's kernels.
  const size_t version = cudnnGetVersion();
  if (version < 90600 || version == 91000 || version == 91001) return false;
  // Fewer than 64 queries (decoding with a KV cache: one query, a new length each step) take
  // tessera's kernels: a plan per length would cost more to build than it saves.
  if (p.q_len < 64) return false;
  // Past 2^31 elements (a tensor's span, or the virtual (B, H, L, S) scores) tessera's own kernels,
  // which index in 64 bits, take the case.
  constexpr int64_t kLimit = int64_t(1) << 31;
  if (p.batch * p.heads * p.q_len * std::max(p.kv_len, p.head_dim) >= kLimit) return false;
  for (const Tensor* t : tensors) {
    if (reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 != 0) return false;
    int64_t span = 1;
    for (int d = 0; d < t->dim(); ++d) span += (t->size(d) - 1) * t->stride(d);
    if (span >= kLimit) return false;
  }
  static std::atomic<int> capability_cache[64] = {};
  const int dev = tensors.begin()[0]->device().index();
  int cc = dev < 64 ? capability_cache[dev].load(std::memory_order_relaxed) : 0;
  if (cc == 0) {
    const DeviceProperties props = get_device_properties(dev);
    cc = props.major * 10 + props.minor;
    if (dev < 64) capability_cache[dev].store(cc, std::memory_order_relaxed);
  }
  return cc >= 80;
}

// The cached entry of a case, building it unless the stream is capturing (then null: not now).
template <class Build>
std::shared_ptr<const Entry> entry_for(const Key& key, cudaStream_t stream, Build&& build) {
  {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    auto it = g_cache.find(key);
    if (it != g_cache.end()) return it->second;
  }
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess) {
    (void)cudaGetLastError();  // not this op's error to report later
    return nullptr;
  }
  if (capturing != cudaStreamCaptureStatusNone) return nullptr;
  {
    std::lock_guard<std::mutex> lock(g_cache_mutex);
    if (g_cache.size() >= kMaxPlans) {
      note_failure("the attention plan cache is full (" + std::to_string(kMaxPlans) + " cases)");
      return nullptr;
    }
  }
  auto e = std::make_shared<Entry>();
  try {
    e->plan = build();
  } catch (const NotImplementedError& err) {
    note_failure(err.what());  // cuDNN's verdict on the case: cached
  } catch (const Error& err) {
    note_failure(err.what());  // out of memory or the like: this call falls back, a later one retries
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(g_cache_mutex);
  return g_cache.emplace(key, std::move(e)).first->second;
}

// Runs a plan: launch(plan, workspace) with `extra` bytes of workspace in front of the plan's own
// (the backward's workspace tensors), from the caching allocator on the current stream.
using Launch = std::function<void(const CudnnPlan&, char*)>;
void run(const CudnnPlan& plan, int64_t extra, const Launch& launch) {
  DataPtr ws;
  if (extra + plan.workspace_size() > 0) ws = allocate_workspace(static_cast<size_t>(extra + plan.workspace_size()));
  launch(plan, static_cast<char*>(ws.get()));
}

// With cuda::cudnn_benchmark() on, the timer that picks the fastest candidate plan (CudnnPlan): one
// warm-up run and three timed ones between events on the stream (the host waits: the search runs once
// per case). Without it, no timer (the heuristics' first choice).
CudnnPlan::Timer make_timer(cudaStream_t stream, int64_t extra, const Launch& launch) {
  if (!cudnn_benchmark()) return {};
  return [stream, extra, &launch](const CudnnPlan& plan) -> float {
    cudaEvent_t a = nullptr, b = nullptr;
    float ms = INFINITY;
    try {
      run(plan, extra, launch);
      if (cudaEventCreate(&a) == cudaSuccess && cudaEventCreate(&b) == cudaSuccess) {
        (void)cudaEventRecord(a, stream);
        for (int i = 0; i < 3; ++i) run(plan, extra, launch);
        (void)cudaEventRecord(b, stream);
        if (cudaEventSynchronize(b) != cudaSuccess || cudaEventElapsedTime(&ms, a, b) != cudaSuccess) ms = INFINITY;
      }
    } catch (const Error&) {
      ms = INFINITY;  // a candidate that fails to run is not chosen
    }
    if (!std::isfinite(ms)) (void)cudaGetLastError();
    if (a != nullptr) (void)cudaEventDestroy(a);
    if (b != nullptr) (void)cudaEventDestroy(b);
    return ms;
  };
}

// Note [cuDNN attention graph]: the operation graphs cuDNN's fused attention engines recognize (as
// its frontend builds them for sdpa / sdpa_backward, cuDNN 9.x below 9.21, where causal attention has
// no single-op descriptor). Dims (B, H, N, D) as in Note [Flash attention layout]; K^T (and in the
// backward V^T) is the K (V) tensor itself described with its last two dims and strides swapped.
//   forward:  S = Q K^T; S *= scale; [causal: S = row >= col ? S : -inf, row / col from GEN_INDEX on
//             axes 2 / 3]; M = max_j S; E = exp(S - M); Z = sum_j E; Stats = M + log Z; P = E / Z
//             (16-bit); O = P V.
//   backward: softmax_sum = sum_d (dO * O) * 1; S = Q K^T * scale - Stats; [causal mask]; P = exp(S);
//             dV = P^T dO; dP = dO V^T; dS = (dP - softmax_sum) * P * scale; dK = dS^T Q;
//             dQ = dS K, accumulated in float (dQ_accum) then copied (IDENTITY) -- or, deterministic,
//             written directly (no dQ_accum).
// P^T and dS^T are RESHAPE ops onto 16-bit virtual tensors with swapped dims and strides. The three
// scalars (scale, -inf, 1) are by-value float tensors handed over in the variant pack. softmax_sum
// and dQ_accum are real tensors in the workspace (before the plan's own workspace): cuDNN 9.6 and
// later do not need dQ_accum zeroed.

// The masked scores' value: -inf from cuDNN 9.10 on, the lowest float before (as its frontend).
float mask_value() { return cudnnGetVersion() >= 91000 ? -INFINITY : -std::numeric_limits<float>::max(); }

// The causal mask of scores s (B, H, L, S) float: row >= col ? s : -inf.
const CudnnDesc& causal_mask(CudnnGraphBuilder& g, const CudnnDesc& s, const std::vector<int64_t>& dims) {
  const CudnnDesc& row = g.virt(dims, CUDNN_DATA_INT32);
  const CudnnDesc& col = g.virt(dims, CUDNN_DATA_INT32);
  const CudnnDesc& mask = g.virt(dims, CUDNN_DATA_BOOLEAN);
  const CudnnDesc& out = g.virt(dims);
  const CudnnDesc& neg_inf = g.tensor(scalar(kNegInf));
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, row, nullptr, 2);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, col, nullptr, 3);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, row, &col, mask, nullptr, -1, CUDNN_DATA_BOOLEAN);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, s, &neg_inf, out, &mask);
  return out;
}

// (B, H, D, N) description of a (B, H, N, D) tensor: its transpose, no copy.
CudnnTensorSpec transposed(int64_t uid, cudnnDataType_t dt, const Tensor& t) {
  return real(uid, dt, {t.size(0), t.size(1), t.size(3), t.size(2)}, {t.stride(0), t.stride(1), t.stride(3), t.stride(2)});
}

std::unique_ptr<CudnnPlan> build_forward(cudnnHandle_t handle, cudnnDataType_t dt, const Tensor& out,
                                         const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                                         const AttentionParams& p, const CudnnPlan::Timer& timer) {
  (void)lse;
  const int64_t B = p.batch, H = p.heads, L = p.q_len, S = p.kv_len;
  const std::vector<int64_t> sdims = {B, H, L, S}, rdims = {B, H, L, 1};
  CudnnGraphBuilder g;
  const CudnnDesc& tq = g.tensor(real(kQ, dt, dims4(q), strides4(q)));
  const CudnnDesc& tkt = g.tensor(transposed(kK, dt, k));
  const CudnnDesc& tv = g.tensor(real(kV, dt, dims4(v), strides4(v)));
  const CudnnDesc& to = g.tensor(real(kO, dt, dims4(out), strides4(out)));
  const CudnnDesc& stats = g.tensor(real(kStats, CUDNN_DATA_FLOAT, rdims, {H * L, L, 1, 1}));
  const CudnnDesc& scale = g.tensor(scalar(kScale));
  const CudnnDesc& s0 = g.virt(sdims);
  g.matmul(tq, tkt, s0);
  const CudnnDesc& s1 = g.virt(sdims);
  g.pointwise(CUDNN_POINTWISE_MUL, s0, &scale, s1);
  const CudnnDesc& s2 = p.causal ? causal_mask(g, s1, sdims) : s1;
  const CudnnDesc& m = g.virt(rdims);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, s2, m);
  const CudnnDesc& s3 = g.virt(sdims);
  g.pointwise(CUDNN_POINTWISE_SUB, s2, &m, s3);
  const CudnnDesc& e = g.virt(sdims);
  g.pointwise(CUDNN_POINTWISE_EXP, s3, nullptr, e);
  const CudnnDesc& z = g.virt(rdims);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, z);
  const CudnnDesc& lz = g.virt(rdims);
  g.pointwise(CUDNN_POINTWISE_LOG, z, nullptr, lz);
  g.pointwise(CUDNN_POINTWISE_ADD, m, &lz, stats);
  const CudnnDesc& pr = g.virt(sdims, dt);
  g.pointwise(CUDNN_POINTWISE_DIV, e, &z, pr);
  g.matmul(pr, tv, to);
  const CudnnDesc graph = g.finalize(handle);
  return std::make_unique<CudnnPlan>(handle, graph, false, "flash_attention_forward", timer);
}

// Bytes of the workspace tensors in front of the backward plan's own workspace (16-byte aligned).
int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }
int64_t dq_accum_bytes(const AttentionParams& p, bool deterministic) {
  return deterministic ? 0 : round16(p.batch * p.heads * p.q_len * p.head_dim * 4);
}
int64_t softmax_sum_bytes(const AttentionParams& p) { return round16(p.batch * p.heads * p.q_len * 4); }

std::unique_ptr<CudnnPlan> build_backward(cudnnHandle_t handle, cudnnDataType_t dt, const Tensor& dq,
                                          const Tensor& dk, const Tensor& dv, const Tensor& dout, const Tensor& q,
                                          const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                                          const AttentionParams& p, bool deterministic,
                                          const CudnnPlan::Timer& timer) {
  (void)lse;
  const int64_t B = p.batch, H = p.heads, L = p.q_len, S = p.kv_len, D = p.head_dim;
  const std::vector<int64_t> sdims = {B, H, L, S}, rdims = {B, H, L, 1}, rstrides = {H * L, L, 1, 1};
  CudnnGraphBuilder g;
  const CudnnDesc& tq = g.tensor(real(kQ, dt, dims4(q), strides4(q)));
  const CudnnDesc& tkt = g.tensor(transposed(kK, dt, k));
  const CudnnDesc& tvt = g.tensor(transposed(kV, dt, v));
  const CudnnDesc& to = g.tensor(real(kO, dt, dims4(out), strides4(out)));
  const CudnnDesc& tdo = g.tensor(real(kDO, dt, dims4(dout), strides4(dout)));
  const CudnnDesc& stats = g.tensor(real(kStats, CUDNN_DATA_FLOAT, rdims, rstrides));
  const CudnnDesc& tdq = g.tensor(real(kDQ, dt, dims4(dq), strides4(dq)));
  const CudnnDesc& tdk = g.tensor(real(kDK, dt, dims4(dk), strides4(dk)));
  const CudnnDesc& tdv = g.tensor(real(kDV, dt, dims4(dv), strides4(dv)));
  const CudnnDesc& scale = g.tensor(scalar(kScale));
  const CudnnDesc& one = g.tensor(scalar(kOne));
  const CudnnDesc& softmax_sum = g.tensor(real(kSoftmaxSum, CUDNN_DATA_FLOAT, rdims, rstrides));
  // softmax_sum = rowsum(dO * O) * 1.
  const CudnnDesc& t0 = g.virt({B, H, L, D});
  g.pointwise(CUDNN_POINTWISE_MUL, tdo, &to, t0);
  const CudnnDesc& t1 = g.virt(rdims);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, t0, t1);
  g.pointwise(CUDNN_POINTWISE_MUL, t1, &one, softmax_sum);
  // P = exp(mask(Q K^T * scale - Stats)).
  const CudnnDesc& s0 = g.virt(sdims);
  g.matmul(tq, tkt, s0);
  const CudnnDesc& s1 = g.virt(sdims);
  g.pointwise(CUDNN_POINTWISE_MUL, s0, &scale, s1);
  const CudnnDesc& s2 = g.virt(sdims);
  g.pointwise(CUDNN_POINTWISE_SUB, s1, &stats, s2);
  const CudnnDesc& s3 = p.causal ? causal_mask(g, s2, sdims) : s2;
  const CudnnDesc& pr = g.virt(sdims);
  g.pointwise(CUDNN_POINTWISE_EXP, s3, nullptr, pr);
  // dV = P^T dO.
  const std::vector<int64_t> tdims = {B, H, S, L}, tstrides = {H * L * S, L * S, 1, S};
  const CudnnDesc& pt = g.virt(tdims, dt, tstrides);
  g.reshape(pr, pt);
  g.matmul(pt, tdo, tdv);
  // dS = (dO V^T - softmax_sum) * P * scale.
  const CudnnDesc& dp = g.virt(sdims);
  g.matmul(tdo, tvt, dp);
  const CudnnDesc& t2 = g.virt(sdims);
  g.pointwise(CUDNN_POINTWISE_SUB, dp, &softmax_sum, t2);
  const CudnnDesc& t3 = g.virt(sdims);
  g.pointwise(CUDNN_POINTWISE_MUL, t2, &pr, t3);
  const CudnnDesc& ds = g.virt(sdims);
  g.pointwise(CUDNN_POINTWISE_MUL, t3, &scale, ds);
  // dK = dS^T Q.
  const CudnnDesc& dst = g.virt(tdims, dt, tstrides);
  g.reshape(ds, dst);
  g.matmul(dst, tq, tdk);
  // dQ = dS K (K^T re-described as K).
  const CudnnDesc& kr = g.virt(dims4(k), CUDNN_DATA_FLOAT, strides4(k));
  g.reshape(tkt, kr);
  if (deterministic) {
    g.matmul(ds, kr, tdq);
  } else {
    const CudnnDesc& acc = g.tensor(real(kDqAccum, CUDNN_DATA_FLOAT, {B, H, L, D}, {H * L * D, L * D, D, 1}));
    g.matmul(ds, kr, acc);
    g.pointwise(CUDNN_POINTWISE_IDENTITY, acc, nullptr, tdq);
  }
  const CudnnDesc graph = g.finalize(handle);
  return std::make_unique<CudnnPlan>(handle, graph, deterministic, "flash_attention_backward", timer);
}

}  // namespace

bool attention_forward_cudnn(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                             const AttentionParams& p) {
  if (!eligible(q.dtype(), p, {&q, &k, &v, &out, &lse})) return false;
  const cudaStream_t stream = current_raw_stream(q.device().index());
  const Key key = make_key(false, p, q.dtype(), {&q, &k, &v, &out});
  cudnnHandle_t handle = cudnn_handle(stream);
  const cudnnDataType_t dt = cudnn_dtype(q.dtype(), "flash_attention_forward");
  float scale = static_cast<float>(p.scale), neg_inf = mask_value();
  std::vector<int64_t> uids = {kQ, kK, kV, kO, kStats, kScale, kNegInf};
  std::vector<void*> ptrs = {q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr(), &scale, &neg_inf};
  if (!p.causal) {  // no mask: no -inf scalar in the graph
    uids.pop_back();
    ptrs.pop_back();
  }
  const Launch launch = [&](const CudnnPlan& plan, char* ws) { plan.execute(handle, uids, ptrs, ws); };
  auto e = entry_for(key, stream, [&] {
    return build_forward(handle, dt, out, lse, q, k, v, p, make_timer(stream, 0, launch));
  });
  if (e == nullptr || e->plan == nullptr) return false;
  run(*e->plan, 0, launch);
  g_runs.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool attention_backward_cudnn(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, const AttentionParams& p) {
  if (!eligible(q.dtype(), p, {&q, &k, &v, &out, &dout, &dq, &dk, &dv, &lse})) return false;
  // cuDNN up to 9.15 needs a padding mask in the backward graph when S is not a multiple of 128 (its
  // frontend adds one as a workaround): those cases take tessera's kernels there.
  if (cudnnGetVersion() <= 91500 && p.kv_len % 128 != 0) return false;
  const cudaStream_t stream = current_raw_stream(q.device().index());
  const Key key = make_key(true, p, q.dtype(), {&q, &k, &v, &out, &dout, &dq, &dk, &dv});
  cudnnHandle_t handle = cudnn_handle(stream);
  const cudnnDataType_t dt = cudnn_dtype(q.dtype(), "flash_attention_backward");
  // The workspace: dQ_accum (non-deterministic graph), softmax_sum, then the plan's own.
  const int64_t acc_bytes = dq_accum_bytes(p, key.deterministic), sum_bytes = softmax_sum_bytes(p);
  float scale = static_cast<float>(p.scale), neg_inf = mask_value(), one = 1.f;
  std::vector<int64_t> uids = {kQ, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV, kScale, kNegInf, kOne, kSoftmaxSum};
  std::vector<void*> ptrs = {q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), lse.data_ptr(),
                             dout.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), &scale, &neg_inf, &one,
                             nullptr};
  if (!p.causal) {  // no mask: no -inf scalar in the graph
    uids.erase(uids.begin() + 10);
    ptrs.erase(ptrs.begin() + 10);
  }
  const size_t sum_slot = ptrs.size() - 1;
  if (!key.deterministic) {
    uids.push_back(kDqAccum);
    ptrs.push_back(nullptr);
  }
  const Launch launch = [&](const CudnnPlan& plan, char* ws) {
    std::vector<void*> at = ptrs;
    at[sum_slot] = ws + acc_bytes;
    if (!key.deterministic) at.back() = ws;
    plan.execute(handle, uids, at, ws + acc_bytes + sum_bytes);
  };
  auto e = entry_for(key, stream, [&] {
    return build_backward(handle, dt, dq, dk, dv, dout, q, k, v, out, lse, p, key.deterministic,
                          make_timer(stream, acc_bytes + sum_bytes, launch));
  });
  if (e == nullptr || e->plan == nullptr) return false;
  run(*e->plan, acc_bytes + sum_bytes, launch);
  g_runs.fetch_add(1, std::memory_order_relaxed);
  return true;
}

int64_t attention_cudnn_runs() { return g_runs.load(std::memory_order_relaxed); }

std::string attention_cudnn_last_failure() {
  std::lock_guard<std::mutex> lock(g_failure_mutex);
  return g_last_failure;
}

}  // namespace tessera::cuda
