// CPU kernels of the foreach family (ops/foreach_kernel.h): per-tensor norms of a list and the in-place
// multiply of a list by a one-element tensor.
//
// Norm: the list is cut into work items of kChunk elements (a tensor gives one item per chunk, an empty
// one none), independently of the thread count; OpenMP spreads the items, each gives one partial
// (sum |x|, sum x^2 or max |x|) accumulated in double, and the partials of a tensor are combined in
// item order. So the result is the same bits whatever the number of threads, and at least as accurate
// as the float accumulation the contract asks for. Max is NaN-propagating (a NaN element wins).
//
// Mul: per tensor, the product in float (double for float64) rounded once, as the CUDA kernel does;
// a scalar of exactly 1 (after conversion) leaves the tensor untouched.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "ops/foreach_kernel.h"
#include "tensor/dispatch_dtype.h"

namespace tessera::cpu::inline TS_CPU_ISA {  // Note [ISA namespaces]
namespace {

constexpr int64_t kChunk = 65536;           // elements per norm work item
constexpr int64_t kParallelGrain = 32768;   // below this many elements in all, one thread

enum class NormKind { L1, L2, Inf };

NormKind norm_kind(double ord) {
  if (ord == 1) return NormKind::L1;
  if (ord == 2) return NormKind::L2;
  return NormKind::Inf;
}

// The partial of n elements from p: eight interleaved accumulators (a fixed order), then combined.
template <class T>
double chunk_partial(const T* __restrict p, int64_t n, NormKind kind) {
  constexpr int kLanes = 8;
  double acc[kLanes] = {};
  const int64_t body = n - n % kLanes;
  if (kind == NormKind::Inf) {
    auto nan_max = [](double a, double b) { return (a > b || std::isnan(a)) ? a : b; };
    for (int64_t i = 0; i < body; i += kLanes)
      for (int k = 0; k < kLanes; ++k) acc[k] = nan_max(std::fabs(static_cast<double>(p[i + k])), acc[k]);
    for (int64_t i = body; i < n; ++i) acc[0] = nan_max(std::fabs(static_cast<double>(p[i])), acc[0]);
    double m = acc[0];
    for (int k = 1; k < kLanes; ++k) m = nan_max(acc[k], m);
    return m;
  }
  if (kind == NormKind::L2) {
    for (int64_t i = 0; i < body; i += kLanes)
      for (int k = 0; k < kLanes; ++k) {
        const double v = static_cast<double>(p[i + k]);
        acc[k] += v * v;
      }
    for (int64_t i = body; i < n; ++i) {
      const double v = static_cast<double>(p[i]);
      acc[0] += v * v;
    }
  } else {
    for (int64_t i = 0; i < body; i += kLanes)
      for (int k = 0; k < kLanes; ++k) acc[k] += std::fabs(static_cast<double>(p[i + k]));
    for (int64_t i = body; i < n; ++i) acc[0] += std::fabs(static_cast<double>(p[i]));
  }
  double s = 0;
  for (int k = 0; k < kLanes; ++k) s += acc[k];
  return s;
}

struct NormItem {
  int64_t tensor;  // index into the list
  int64_t start;   // first element
  int64_t len;     // 1..kChunk
};

void norm_cpu(const TensorList& tensors, const Tensor& out, double ord) {
  const NormKind kind = norm_kind(ord);
  std::vector<NormItem> items;
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int64_t n = tensors[i].numel();
    total += n;
    for (int64_t s = 0; s < n; s += kChunk)
      items.push_back({static_cast<int64_t>(i), s, std::min(kChunk, n - s)});
  }
  std::vector<double> partial(items.size());
  const int64_t nitems = static_cast<int64_t>(items.size());
#pragma omp parallel for schedule(static) if (total >= kParallelGrain && nitems > 1)
  for (int64_t k = 0; k < nitems; ++k) {
    const NormItem& it = items[static_cast<size_t>(k)];
    const Tensor& t = tensors[static_cast<size_t>(it.tensor)];
    partial[static_cast<size_t>(k)] = dispatch_floating(t.dtype(), "_foreach_norm", [&]<class T>(TypeTag<T>) {
      return chunk_partial(t.data_ptr<T>() + it.start, it.len, kind);
    });
  }
  // Combine each tensor's partials in item order (items are grouped by tensor, in list order).
  std::vector<double> value(tensors.size(), 0.0);
  for (size_t k = 0; k < items.size(); ++k) {
    double& v = value[static_cast<size_t>(items[k].tensor)];
    const double p = partial[k];
    if (kind == NormKind::Inf) v = (p > v || std::isnan(p)) ? p : v;
    else v += p;
  }
  dispatch_floating(out.dtype(), "_foreach_norm", [&]<class O>(TypeTag<O>) {
    O* o = out.data_ptr<O>();
    for (size_t i = 0; i < tensors.size(); ++i) {
      const double v = kind == NormKind::L2 ? std::sqrt(value[i]) : value[i];
      // The value a float accumulation stands for (double for float64 tensors), then out's dtype.
      const double in_acc = tensors[i].dtype() == kFloat64 ? v : static_cast<double>(static_cast<float>(v));
      o[i] = static_cast<O>(static_cast<acc_t<O>>(in_acc));
    }
  });
}

template <class T>
void mul_loop(T* __restrict g, int64_t n, acc_t<T> s) {
  using C = acc_t<T>;
#pragma omp parallel for schedule(static) if (n >= kParallelGrain)
  for (int64_t i = 0; i < n; ++i) g[i] = static_cast<T>(static_cast<C>(g[i]) * s);
}

void mul_cpu(const TensorList& tensors, const Tensor& scalar) {
  const double s = scalar.dtype() == kFloat64 ? *scalar.data_ptr<double>() : *scalar.data_ptr<float>();
  for (const Tensor& t : tensors) {
    if (t.numel() == 0) continue;
    dispatch_floating(t.dtype(), "_foreach_mul_", [&]<class T>(TypeTag<T>) {
      const acc_t<T> c = static_cast<acc_t<T>>(s);
      if (c != acc_t<T>(1)) mul_loop(t.data_ptr<T>(), t.numel(), c);
    });
  }
}

}  // namespace

void register_foreach() {
  foreach_norm_kernel.set(DeviceType::CPU, &norm_cpu);
  foreach_mul_kernel.set(DeviceType::CPU, &mul_cpu);
}

}  // namespace tessera::cpu::TS_CPU_ISA
