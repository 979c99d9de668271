// The foreach ops (PyTorch's torch._foreach_norm and torch._foreach_mul_ with a tensor scalar): one
// validation pass over the list, then the foreach kernel slots (ops/foreach_kernel.h), which run the
// whole list in a few launches where the backend can (multi-tensor apply on CUDA).
//
// What goes around the kernels, as PyTorch's slow paths do:
// - norm orders other than 1, 2 and inf (0, 3, ...), and any call that autograd must record (grad mode
//   on and a tensor requiring grad), take the composite per-tensor norm(), which records itself;
// - for mul_, a non-contiguous tensor, or one whose product autograd must record, takes Tensor::mul_.
// Strided inputs of the norm kernel go through a contiguous copy (a read needs no write back). A mul_
// list whose tensors share elements (one listed twice) is scaled one kernel call per tensor, so that
// shared elements are scaled once per listing, in order, as a loop of mul_ would.
//
// _foreach_norm's results are 0-dim views into one (n) buffer per dtype of the list, as PyTorch's CUDA
// path returns them: one kernel call per dtype, no per-tensor cast or copy.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "ops/autograd_hook.h"
#include "ops/foreach_kernel.h"
#include "ops/foreach_ops.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"
#include "tessera/autograd.h"
#include "tensor/tensor_impl.h"

namespace tessera {
namespace {

constexpr const char* kNormOp = op_name(OpId::_foreach_norm);
constexpr const char* kMulOp = op_name(OpId::_foreach_mul_);

// Every tensor defined, floating and on the first one's device.
void check_list(const char* op, const std::vector<Tensor>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TS_CHECK(t.defined(), ValueError, op, ": tensors[", i, "] is undefined; expected a list of defined tensors");
    TS_CHECK(t.is_floating_point(), DTypeError, op, ": tensors[", i, "] must be a floating-point tensor, got ",
             dtype_name(t.dtype()));
    TS_CHECK(t.device() == tensors[0].device(), DeviceError, op,
             ": expected all tensors to be on the same device, but tensors[0] is on ", tensors[0].device().str(),
             " and tensors[", i, "] is on ", t.device().str());
  }
}

void check_ord(double ord) {
  TS_CHECK(ord >= 0, ValueError, kNormOp, ": ord must be 0, a positive number or inf, got ", ord);
}

// norm() of one tensor, except that an empty tensor's inf norm is 0 as in the kernels (PyTorch's CUDA
// _foreach_norm gives 0 there too; its CPU loop over linalg.vector_norm raises).
Tensor composite_norm(const Tensor& t, double ord) {
  if (t.numel() == 0 && std::isinf(ord)) return zeros({}, TensorOptions(t.dtype(), t.device()));
  return norm(t, ord);
}

bool kernel_ord(double ord) { return ord == 1 || ord == 2 || ord == std::numeric_limits<double>::infinity(); }

// The kernel's inputs: the tensors themselves, or contiguous copies of the strided ones.
std::vector<Tensor> contiguous_list(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> work;
  work.reserve(tensors.size());
  for (const Tensor& t : tensors) work.push_back(t.is_contiguous() ? t : t.contiguous());
  return work;
}

// Whether two non-empty contiguous tensors of the list share elements (a tensor listed twice,
// overlapping views of one buffer). Views side by side in one buffer (bucketed gradients) do not.
bool any_overlap(const std::vector<Tensor>& tensors) {
  struct Range {
    const void* storage;
    int64_t begin, end;  // elements [begin, end) of the storage
  };
  std::vector<Range> ranges;
  ranges.reserve(tensors.size());
  for (const Tensor& t : tensors)
    if (t.numel() > 0)
      ranges.push_back({t.impl()->storage().get(), t.impl()->storage_offset(), t.impl()->storage_offset() + t.numel()});
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.storage != b.storage ? std::less<const void*>()(a.storage, b.storage) : a.begin < b.begin;
  });
  for (size_t k = 1; k < ranges.size(); ++k) {
    const Range& prev = ranges[k - 1];
    if (ranges[k].storage == prev.storage && ranges[k].begin < prev.end) return true;
    if (ranges[k].storage == prev.storage) ranges[k].end = std::max(ranges[k].end, prev.end);  // furthest end so far
  }
  return false;
}

}  // namespace

std::vector<Tensor> _foreach_norm(const std::vector<Tensor>& tensors, double ord) {
  OpScope scope(OpId::_foreach_norm, tensors);
  check_list(kNormOp, tensors);
  check_ord(ord);
  std::vector<Tensor> result(tensors.size());
  if (tensors.empty()) return result;
  if (!kernel_ord(ord) || should_record(tensors)) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      result[i] = composite_norm(tensors[i], ord);
      // Autocast may have run norm in float32; the result keeps the tensor's dtype.
      if (result[i].dtype() != tensors[i].dtype()) result[i] = result[i].to(tensors[i].dtype());
    }
    return result;
  }
  NoGradGuard no_grad;
  const Device device = tensors[0].device();
  // One kernel call per dtype of the list (in order of first appearance; usually one).
  std::vector<bool> done(tensors.size(), false);
  for (size_t first = 0; first < tensors.size(); ++first) {
    if (done[first]) continue;
    const DType dtype = tensors[first].dtype();
    std::vector<size_t> index;
    std::vector<Tensor> group;
    for (size_t i = first; i < tensors.size(); ++i) {
      if (done[i] || tensors[i].dtype() != dtype) continue;
      done[i] = true;
      index.push_back(i);
      group.push_back(tensors[i]);
    }
    Tensor out = make_empty({static_cast<int64_t>(group.size())}, dtype, device);  // (n_group)
    foreach_norm_kernel(device, contiguous_list(group), out, ord);
    for (size_t j = 0; j < index.size(); ++j) result[index[j]] = make_view(out, {}, {}, static_cast<int64_t>(j));
  }
  return result;
}

Tensor foreach_norm_stacked(const std::vector<Tensor>& tensors, double ord, DType acc) {
  OpScope scope(OpId::_foreach_norm, tensors);
  check_list(kNormOp, tensors);
  check_ord(ord);
  TS_CHECK(acc == kFloat32 || acc == kFloat64, DTypeError, kNormOp,
           ": the accumulation dtype must be float32 or float64, got ", dtype_name(acc));
  if (tensors.empty()) return make_empty({0}, acc, Device::cpu());
  if (!kernel_ord(ord) || should_record(tensors)) {
    std::vector<Tensor> norms;
    norms.reserve(tensors.size());
    for (const Tensor& t : tensors) norms.push_back(composite_norm(cast_to(t, acc), ord));
    return stack(norms);
  }
  NoGradGuard no_grad;
  const Device device = tensors[0].device();
  Tensor out = make_empty({static_cast<int64_t>(tensors.size())}, acc, device);  // (n)
  foreach_norm_kernel(device, contiguous_list(tensors), out, ord);
  return out;
}

void _foreach_mul_(const std::vector<Tensor>& tensors, const Tensor& scalar) {
  OpScope scope(OpId::_foreach_mul_, tensors);
  TS_CHECK(scalar.defined(), ValueError, kMulOp, ": scalar is undefined; expected a one-element floating tensor");
  TS_CHECK(scalar.numel() == 1, ShapeError, kMulOp, ": scalar must be a one-element tensor, got shape ",
           scalar.sizes());
  TS_CHECK(scalar.is_floating_point(), DTypeError, kMulOp, ": scalar must be a floating-point tensor, got ",
           dtype_name(scalar.dtype()));
  check_list(kMulOp, tensors);
  for (size_t i = 0; i < tensors.size(); ++i)
    TS_CHECK(tensors[i].device() == scalar.device(), DeviceError, kMulOp, ": tensors[", i, "] is on ",
             tensors[i].device().str(), " but scalar is on ", scalar.device().str(),
             "; expected all tensors to be on the same device");
  if (tensors.empty()) return;

  // Every tensor sees the scalar's value before the call, even one that shares its memory (a kernel
  // block may read the scalar while another writes the tensor).
  Tensor sc = scalar;
  for (const Tensor& t : tensors) {
    if (t.impl()->storage() == scalar.impl()->storage()) {
      sc = scalar.clone();
      break;
    }
  }
  // Tensor::mul_ for what the kernel does not take; it checks, records and bumps versions itself.
  std::vector<Tensor> work;
  work.reserve(tensors.size());
  Tensor sc0d;  // the scalar as a 0-dim tensor, broadcastable to any shape
  for (const Tensor& t : tensors) {
    if (t.is_contiguous() && !should_record({&t, &sc})) {
      work.push_back(t);
      continue;
    }
    if (!sc0d.defined()) sc0d = sc.dim() == 0 ? sc : sc.reshape({});
    const_cast<Tensor&>(t).mul_(sc0d);
  }
  if (work.empty()) return;

  NoGradGuard no_grad;
  // The kernel reads a float32 or float64 scalar (16-bit values are exact in float32).
  const Tensor s = sc.dtype() == kFloat32 || sc.dtype() == kFloat64 ? sc : cast_to(sc, kFloat32);
  if (any_overlap(work)) {
    // One launch would race on the shared elements: one call per tensor, in list order, as mul_ would.
    for (const Tensor& t : work) foreach_mul_kernel(scalar.device(), std::vector<Tensor>{t}, s);
  } else {
    foreach_mul_kernel(scalar.device(), work, s);
  }
  for (const Tensor& t : work) t.impl()->bump_version();
}

}  // namespace tessera
