// cuDNN graph (backend) API pieces (cudnn_graph.h).
#include "kernels/cuda/cudnn_graph.h"

#include <cmath>
#include <utility>

#include "tessera/error.h"

namespace tessera::cuda {

CudnnDesc::CudnnDesc(cudnnBackendDescriptorType_t type) {
  TS_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d_));
}

CudnnDesc::~CudnnDesc() {
  if (d_ != nullptr) (void)cudnnBackendDestroyDescriptor(d_);
}

CudnnDesc& CudnnDesc::operator=(CudnnDesc&& o) noexcept {
  if (this != &o) {
    if (d_ != nullptr) (void)cudnnBackendDestroyDescriptor(d_);
    d_ = o.d_;
    o.d_ = nullptr;
  }
  return *this;
}

CudnnDesc& CudnnDesc::set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                          const void* values) {
  TS_CUDNN_CHECK(cudnnBackendSetAttribute(d_, name, type, count, values));
  return *this;
}
CudnnDesc& CudnnDesc::set_int64(cudnnBackendAttributeName_t name, int64_t v) {
  return set(name, CUDNN_TYPE_INT64, 1, &v);
}
CudnnDesc& CudnnDesc::set_int64s(cudnnBackendAttributeName_t name, const std::vector<int64_t>& v) {
  return set(name, CUDNN_TYPE_INT64, static_cast<int64_t>(v.size()), v.data());
}
CudnnDesc& CudnnDesc::set_bool(cudnnBackendAttributeName_t name, bool v) {
  return set(name, CUDNN_TYPE_BOOLEAN, 1, &v);
}
CudnnDesc& CudnnDesc::set_dtype(cudnnBackendAttributeName_t name, cudnnDataType_t v) {
  return set(name, CUDNN_TYPE_DATA_TYPE, 1, &v);
}
CudnnDesc& CudnnDesc::set_float(cudnnBackendAttributeName_t name, float v) {
  return set(name, CUDNN_TYPE_FLOAT, 1, &v);
}
CudnnDesc& CudnnDesc::set_desc(cudnnBackendAttributeName_t name, const CudnnDesc& d) {
  cudnnBackendDescriptor_t raw = d.get();
  return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
}
CudnnDesc& CudnnDesc::finalize() {
  TS_CUDNN_CHECK(cudnnBackendFinalize(d_));
  return *this;
}

std::vector<int64_t> packed_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

CudnnDesc make_cudnn_tensor(const CudnnTensorSpec& t) {
  CudnnDesc d(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  d.set_dtype(CUDNN_ATTR_TENSOR_DATA_TYPE, t.dtype)
      .set_int64s(CUDNN_ATTR_TENSOR_DIMENSIONS, t.dims)
      .set_int64s(CUDNN_ATTR_TENSOR_STRIDES, t.strides.empty() ? packed_strides(t.dims) : t.strides)
      .set_int64(CUDNN_ATTR_TENSOR_UNIQUE_ID, t.uid)
      .set_int64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, 16)
      .set_bool(CUDNN_ATTR_TENSOR_IS_VIRTUAL, t.is_virtual);
  if (t.by_value) d.set_bool(CUDNN_ATTR_TENSOR_IS_BY_VALUE, true);
  d.finalize();
  return d;
}

const CudnnDesc& CudnnGraphBuilder::tensor(const CudnnTensorSpec& spec) {
  for (auto& [uid, d] : tensors_)
    if (uid == spec.uid) return d;
  tensors_.emplace_back(spec.uid, make_cudnn_tensor(spec));
  return tensors_.back().second;
}

const CudnnDesc& CudnnGraphBuilder::virt(const std::vector<int64_t>& dims, cudnnDataType_t dtype,
                                         const std::vector<int64_t>& strides) {
  CudnnTensorSpec s;
  s.uid = next_virtual_uid_++;
  s.dtype = dtype;
  s.dims = dims;
  s.strides = strides;
  s.is_virtual = true;
  return tensor(s);
}

void CudnnGraphBuilder::pointwise(cudnnPointwiseMode_t mode, const CudnnDesc& x, const CudnnDesc* b,
                                  const CudnnDesc& y, const CudnnDesc* t, int64_t axis, cudnnDataType_t prec) {
  CudnnDesc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode).set_dtype(CUDNN_ATTR_POINTWISE_MATH_PREC, prec);
  if (axis >= 0) pw.set_int64(CUDNN_ATTR_POINTWISE_AXIS, axis);
  pw.finalize();
  CudnnDesc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
      .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x)
      .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
  if (b != nullptr) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
  if (t != nullptr) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
  op.set_float(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, 1.f).set_float(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, 1.f);
  op.finalize();
  aux_.push_back(std::move(pw));
  ops_.push_back(std::move(op));
}

void CudnnGraphBuilder::matmul(const CudnnDesc& a, const CudnnDesc& b, const CudnnDesc& c) {
  CudnnDesc mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  mm.set_dtype(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT).finalize();
  CudnnDesc op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
      .set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
      .set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
      .set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm)
      .finalize();
  aux_.push_back(std::move(mm));
  ops_.push_back(std::move(op));
}

void CudnnGraphBuilder::reduction(cudnnReduceTensorOp_t red, const CudnnDesc& x, const CudnnDesc& y) {
  CudnnDesc rd(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  rd.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &red)
      .set_dtype(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT);
#if CUDNN_VERSION >= 91100
  if (cudnnGetVersion() >= 91100) rd.set_bool(CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC, false);  // as its frontend
#endif
  rd.finalize();
  CudnnDesc op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
      .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y)
      .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, rd)
      .finalize();
  aux_.push_back(std::move(rd));
  ops_.push_back(std::move(op));
}

void CudnnGraphBuilder::reshape(const CudnnDesc& x, const CudnnDesc& y) {
  CudnnDesc op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
  op.set_desc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x).set_desc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y).finalize();
  ops_.push_back(std::move(op));
}

CudnnDesc CudnnGraphBuilder::finalize(cudnnHandle_t handle) {
  std::vector<cudnnBackendDescriptor_t> raw;
  raw.reserve(ops_.size());
  for (const CudnnDesc& op : ops_) raw.push_back(op.get());
  CudnnDesc g(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  g.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
      .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(raw.size()),
           raw.data())
      .finalize();
  return g;
}

namespace {

// The engine configurations cuDNN's heuristics of `mode` propose for a graph (best first).
std::vector<CudnnDesc> heuristic_configs(const CudnnDesc& graph, cudnnBackendHeurMode_t mode) {
  CudnnDesc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode)
      .finalize();
  int64_t count = 0;
  TS_CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
  std::vector<CudnnDesc> cfgs;
  for (int64_t i = 0; i < count; ++i) cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const CudnnDesc& c : cfgs) raw.push_back(c.get());
  int64_t got = 0;
  if (count > 0)
    TS_CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                            CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()));
  cfgs.resize(static_cast<size_t>(got));
  return cfgs;
}

// Whether an engine configuration's engine carries the non-deterministic numerical note; its global
// index into *index.
bool nondeterministic(const CudnnDesc& cfg, int64_t* index) {
  CudnnDesc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t n = 0;
  TS_CUDNN_CHECK(cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                          &n, &raw));
  (void)cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, index);
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t count = 0;
  if (cudnnBackendGetAttribute(raw, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, notes) != CUDNN_STATUS_SUCCESS)
    return true;  // unknown: not promised deterministic
  for (int64_t i = 0; i < count; ++i)
    if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) return true;
  return false;
}

// Appends " <index>(<why>)" to the list of engines tried.
void note_tried(std::string& tried, int64_t index, const char* why) {
  tried.append(1, ' ').append(std::to_string(index)).append(1, '(').append(why).append(1, ')');
}

}  // namespace

CudnnPlan::CudnnPlan(cudnnHandle_t handle, const CudnnDesc& graph, bool deterministic, const char* op,
                     const Timer& timer, int max_candidates) {
  std::string tried;
  float best = INFINITY;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    std::vector<CudnnDesc> cfgs;
    try {
      cfgs = heuristic_configs(graph, mode);
    } catch (const NotImplementedError&) {
      continue;  // no heuristics of this mode for the graph
    }
    for (const CudnnDesc& cfg : cfgs) {
      int64_t index = -1;
      const bool nondet = nondeterministic(cfg, &index);
      if (deterministic && nondet) {
        note_tried(tried, index, "nondeterministic");
        continue;
      }
      CudnnPlan cand;
      cand.plan_ = CudnnDesc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      cand.plan_.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle)
          .set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg);
      const cudnnStatus_t st = cudnnBackendFinalize(cand.plan_.get());
      if (cudnn_not_supported(st)) {
        note_tried(tried, index, cudnnGetErrorString(st));
        continue;
      }
      TS_CUDNN_CHECK(st);  // anything else (out of memory, ...) is no verdict on the engine: raised
      int64_t n = 0;
      TS_CUDNN_CHECK(cudnnBackendGetAttribute(cand.plan_.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                              CUDNN_TYPE_INT64, 1, &n, &cand.workspace_));
      cand.name_ = "engine " + std::to_string(index);
      if (!timer) {  // the heuristics' first choice
        *this = std::move(cand);
        return;
      }
      const float ms = timer(cand);
      ++timed_;
      if (ms < best) {
        best = ms;
        const int timed = timed_;
        *this = std::move(cand);
        timed_ = timed;
      }
      if (timed_ >= max_candidates && plan_.get() != nullptr) return;
    }
    if (plan_.get() != nullptr) return;  // the fallback list only where mode A gave nothing that runs
  }
  TS_CHECK(plan_.get() != nullptr, NotImplementedError, op, ": cuDNN has no engine for this graph (tried:",
           tried.empty() ? " none" : tried, ")");
}

void CudnnPlan::execute(cudnnHandle_t handle, const std::vector<int64_t>& uids, const std::vector<void*>& pointers,
                        void* workspace) const {
  CudnnDesc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()), uids.data())
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, static_cast<int64_t>(pointers.size()),
           pointers.data())
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace)
      .finalize();
  TS_CUDNN_CHECK(cudnnBackendExecute(handle, plan_.get(), pack.get()));
}

}  // namespace tessera::cuda
