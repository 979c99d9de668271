// cuDNN's graph (backend) API in small owning pieces (cudnn_graph.cpp): descriptors, tensors,
// operations, the operation graph, and an execution plan from cuDNN's heuristics. The kernels that
// need a fused cuDNN engine (attention_cudnn.cpp: scaled-dot-product attention) describe their
// operation graph with these and run it through a cached CudnnPlan.
//
// Errors: every backend call goes through TS_CUDNN_CHECK (cudnn_handle.h), so a graph cuDNN cannot
// run raises NotImplementedError ("not supported by cuDNN") and anything else DeviceError; the
// caller decides whether to fall back.
#pragma once
#include <cudnn.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/cudnn_handle.h"

namespace tessera::cuda {

// One backend descriptor, destroyed with the object (move-only).
class CudnnDesc {
 public:
  CudnnDesc() = default;
  explicit CudnnDesc(cudnnBackendDescriptorType_t type);
  ~CudnnDesc();
  CudnnDesc(CudnnDesc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  CudnnDesc& operator=(CudnnDesc&& o) noexcept;
  CudnnDesc(const CudnnDesc&) = delete;
  CudnnDesc& operator=(const CudnnDesc&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }

  CudnnDesc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                 const void* values);
  CudnnDesc& set_int64(cudnnBackendAttributeName_t name, int64_t v);
  CudnnDesc& set_int64s(cudnnBackendAttributeName_t name, const std::vector<int64_t>& v);
  CudnnDesc& set_bool(cudnnBackendAttributeName_t name, bool v);
  CudnnDesc& set_dtype(cudnnBackendAttributeName_t name, cudnnDataType_t v);
  CudnnDesc& set_float(cudnnBackendAttributeName_t name, float v);
  CudnnDesc& set_desc(cudnnBackendAttributeName_t name, const CudnnDesc& d);
  CudnnDesc& finalize();

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// A tensor of an operation graph. `uid` names it in the variant pack (real tensors and by-value
// scalars) or only inside the graph (virtual intermediates).
struct CudnnTensorSpec {
  int64_t uid = 0;
  cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
  std::vector<int64_t> dims, strides;
  bool is_virtual = false;
  bool by_value = false;  // a host scalar handed over in the variant pack (dims all 1)
};
CudnnDesc make_cudnn_tensor(const CudnnTensorSpec& t);

// Row-major (packed) strides of dims.
std::vector<int64_t> packed_strides(const std::vector<int64_t>& dims);

// An operation graph being described: its tensors (kept alive here) and operations, in order.
class CudnnGraphBuilder {
 public:
  // The tensor descriptor of a spec (created once per uid; later calls with the same uid return it).
  // References returned stay valid for the builder's lifetime.
  const CudnnDesc& tensor(const CudnnTensorSpec& spec);
  // A virtual intermediate of the given type and dims (packed strides unless given), with a fresh uid.
  const CudnnDesc& virt(const std::vector<int64_t>& dims, cudnnDataType_t dtype = CUDNN_DATA_FLOAT,
                        const std::vector<int64_t>& strides = {});

  // y = op(x[, b[, t]]) elementwise (mode a CUDNN_POINTWISE_*), computed in `prec` (float; boolean for
  // the comparisons); axis >= 0 sets CUDNN_ATTR_POINTWISE_AXIS (GEN_INDEX). Alphas 1.
  void pointwise(cudnnPointwiseMode_t mode, const CudnnDesc& x, const CudnnDesc* b, const CudnnDesc& y,
                 const CudnnDesc* t = nullptr, int64_t axis = -1, cudnnDataType_t prec = CUDNN_DATA_FLOAT);
  // y = x re-described (the same elements under y's dims and strides: a transpose when y swaps them).
  void reshape(const CudnnDesc& x, const CudnnDesc& y);
  // c = a @ b over the last two dims (batched over the leading ones), float accumulation.
  void matmul(const CudnnDesc& a, const CudnnDesc& b, const CudnnDesc& c);
  // y = reduce(x) over the dims where y has size 1 (op CUDNN_REDUCE_TENSOR_MAX / ADD), in float.
  void reduction(cudnnReduceTensorOp_t op, const CudnnDesc& x, const CudnnDesc& y);

  // The finalized operation graph of everything added, on `handle`.
  CudnnDesc finalize(cudnnHandle_t handle);

 private:
  std::deque<std::pair<int64_t, CudnnDesc>> tensors_;  // a deque: references stay valid as it grows
  std::vector<CudnnDesc> ops_;
  std::vector<CudnnDesc> aux_;  // the pointwise / matmul / reduction descriptors the ops refer to
  int64_t next_virtual_uid_ = 1'000'000;
};

// An execution plan for an operation graph: the first of cuDNN's heuristic (mode A, then the
// fallback list) engine configurations that finalizes, or, given a timer, the fastest by its timing
// of the first `max_candidates` that finalize (cuda::cudnn_benchmark()'s search: the timer runs the
// candidate and returns milliseconds, or +inf where it fails). `deterministic` skips engines whose
// numerical notes say they are not. Raises NotImplementedError when none finalizes.
class CudnnPlan {
 public:
  using Timer = std::function<float(const CudnnPlan&)>;
  CudnnPlan(cudnnHandle_t handle, const CudnnDesc& graph, bool deterministic, const char* op,
            const Timer& timer = {}, int max_candidates = 8);
  int64_t workspace_size() const { return workspace_; }
  const std::string& engine_name() const { return name_; }  // "engine N" (its global index)
  int candidates_timed() const { return timed_; }
  // Runs the plan on the handle's stream: uids[i] <- pointers[i] (by-value scalars point to host
  // memory holding the value), workspace of at least workspace_size() bytes.
  void execute(cudnnHandle_t handle, const std::vector<int64_t>& uids, const std::vector<void*>& pointers,
               void* workspace) const;

 private:
  CudnnPlan() = default;
  CudnnDesc plan_;
  int64_t workspace_ = 0;
  std::string name_;
  int timed_ = 0;
};

}  // namespace tessera::cuda
