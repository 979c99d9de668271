// CPU kernels of advanced indexing (Note [Advanced index plan] in ops/index_kernel.h): index (read)
// and index_put (write or accumulate), which also serve index_select, index_add and embedding.
//
// Both first turn the index tensors into one element offset per position b of index_shape
// (`mid[b]`), validating (and, where the op allows, wrapping) every value before any write. The
// pre/post dims of self are walked through offset tables, except the innermost post dims, which are
// merged where their strides chain and walked arithmetically so the copy loop vectorizes.
// index_put is serial over b and parallel over pre/post positions: distinct pre/post positions of a
// non-overlapping tensor never share an element, so accumulation is race-free and deterministic.
//
// Note [Index accumulate]: with accumulate, the positions b that hit the same element are summed in
// the accumulate type (float for the 16-bit floats) in index order and rounded once, as PyTorch's CUDA
// index_put_ sums each run of its sorted indices in its opmath type. Rounding after every add made the
// bfloat16 gradient of x[idx] (index's backward), with 104 copies of two rows, 8 times further from
// float64 than PyTorch's (found by the random program tester on the GPU, seed 1014870). The CUDA
// backend's sorted path (kernels/cuda/index.cu) does the same sum, so the two agree.
#include <algorithm>
#include <initializer_list>
#include <numeric>
#include <vector>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/index_common.h"
#include "ops/index_kernel.h"

namespace tessera::cpu {
namespace {

// Sizes with size-1 dims dropped and neighbours merged where every operand's strides chain.
struct Collapsed {
  Shape sizes;
  std::vector<Shape> strides;  // per operand, aligned with sizes
};

Collapsed collapse(const Shape& sizes, std::initializer_list<const Shape*> strides) {
  std::vector<const Shape*> st(strides);
  Collapsed c;
  c.strides.resize(st.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    if (!c.sizes.empty()) {
      bool chain = true;
      for (size_t t = 0; t < st.size(); ++t) chain = chain && c.strides[t].back() == (*st[t])[d] * sizes[d];
      if (chain) {
        c.sizes.back() *= sizes[d];
        for (size_t t = 0; t < st.size(); ++t) c.strides[t].back() = (*st[t])[d];
        continue;
      }
    }
    c.sizes.push_back(sizes[d]);
    for (size_t t = 0; t < st.size(); ++t) c.strides[t].push_back((*st[t])[d]);
  }
  return c;
}

// The post dims of a Collapsed split into an innermost run (walked with a stride per operand) and
// a table of element offsets per operand for the dims outside it.
struct PostWalk {
  int64_t inner = 1;
  std::vector<int64_t> inner_stride;
  std::vector<std::vector<int64_t>> outer;
};

PostWalk post_walk(Collapsed c) {
  PostWalk w;
  const size_t n = c.strides.size();
  w.inner_stride.assign(n, 1);
  if (!c.sizes.empty()) {
    w.inner = c.sizes.back();
    c.sizes.pop_back();
    for (size_t t = 0; t < n; ++t) {
      w.inner_stride[t] = c.strides[t].back();
      c.strides[t].pop_back();
    }
  }
  for (size_t t = 0; t < n; ++t) w.outer.push_back(layout_offsets(c.sizes, c.strides[t]));
  return w;
}

// mid[b] = sum over k of index_k[b] * indexed_stride_k, every value checked before any use.
std::vector<int64_t> index_offsets(const IndexPlan& plan) {
  const int64_t nb = numel_of(plan.index_shape);
  std::vector<int64_t> mid(static_cast<size_t>(nb), 0);
  if (nb == 0) return mid;
  BadIndex bad;
  const int chunks = num_chunks(nb, 16384);
  for (size_t k = 0; k < plan.indices.size(); ++k) {
    const Tensor& ix = plan.indices[k];
    const int64_t size = plan.indexed_sizes[k], stride = plan.indexed_strides[k], dim = plan.indexed_dims[k];
    const bool wrap = plan.wrap_negative;
    auto run = [&]<class I>(TypeTag<I>) {
      const I* base = static_cast<const I*>(ix.data_ptr());
      parallel_chunks(nb, chunks, [&](int64_t b0, int64_t b1, int) {
        bool seen = false;  // positions rise within a chunk: its first bad one is the one to report
        strided_walk<1>(plan.index_shape, {&ix.strides()}, b0, b1, [&](int64_t pos, const int64_t* off, const int64_t*) {
          const int64_t v = static_cast<int64_t>(base[off[0]]);
          const int64_t w = (wrap && v < 0) ? v + size : v;
          if (w < 0 || w >= size) [[unlikely]] {
            if (!seen) bad.record(pos, v, dim, size);
            seen = true;
            return;
          }
          mid[pos] += w * stride;
        });
      });
    };
    if (ix.dtype() == kInt32) run(TypeTag<int32_t>{});
    else run(TypeTag<int64_t>{});
  }
  bad.raise_if_found(plan.op);
  return mid;
}

void index_cpu(const Tensor& out, const Tensor& self, const IndexPlan& plan) {
  const std::vector<int64_t> mid = index_offsets(plan);
  if (out.numel() == 0) return;
  const std::vector<int64_t> pre = layout_offsets(plan.pre_sizes, plan.pre_strides);
  const PostWalk post = post_walk(collapse(plan.post_sizes, {&plan.post_strides}));
  const int64_t nb = static_cast<int64_t>(mid.size()), np = static_cast<int64_t>(pre.size());
  const int64_t nq = static_cast<int64_t>(post.outer[0].size()), qi = post.inner, qs = post.inner_stride[0];
  const int64_t rows = np * nb * nq;  // out is contiguous: row r holds qi elements at r * qi
  const std::vector<int64_t>& outer = post.outer[0];
  dispatch_dtype(self.dtype(), plan.op, [&]<class T>(TypeTag<T>) {
    const T* src = static_cast<const T*>(self.data_ptr());
    T* dst = static_cast<T*>(out.data_ptr());
#pragma omp parallel for schedule(static) if (rows > 1 && rows * qi >= 16384)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t q = r % nq, b = (r / nq) % nb, p = r / (nq * nb);
      const T* s = src + pre[p] + mid[b] + outer[q];
      T* d = dst + r * qi;
      if (qs == 1) {
        for (int64_t i = 0; i < qi; ++i) d[i] = s[i];
      } else {
        for (int64_t i = 0; i < qi; ++i) d[i] = s[i * qs];
      }
    }
  });
}

void index_put_cpu(const Tensor& self, const Tensor& values, const IndexPlan& plan, bool accumulate,
                   const Scalar& alpha) {
  const std::vector<int64_t> mid = index_offsets(plan);
  if (values.numel() == 0) return;
  // values has sizes pre + index_shape + post: split its strides the same way.
  const Shape& vs = values.strides();
  const auto npre = static_cast<ptrdiff_t>(plan.pre_sizes.size());
  const auto nidx = static_cast<ptrdiff_t>(plan.index_shape.size());
  const Shape v_pre(vs.begin(), vs.begin() + npre), v_mid(vs.begin() + npre, vs.begin() + npre + nidx),
      v_post(vs.begin() + npre + nidx, vs.end());
  const std::vector<int64_t> dpre = layout_offsets(plan.pre_sizes, plan.pre_strides);
  const std::vector<int64_t> vpre = layout_offsets(plan.pre_sizes, v_pre);
  const std::vector<int64_t> vmid = layout_offsets(plan.index_shape, v_mid);
  const PostWalk post = post_walk(collapse(plan.post_sizes, {&plan.post_strides, &v_post}));
  const std::vector<int64_t>&douter = post.outer[0], &vouter = post.outer[1];
  const int64_t nb = static_cast<int64_t>(mid.size()), np = static_cast<int64_t>(dpre.size());
  const int64_t nq = static_cast<int64_t>(douter.size()), qi = post.inner;
  const int64_t ds = post.inner_stride[0], vst = post.inner_stride[1];
  constexpr int64_t kBlock = 4096;  // inner elements per task: keeps a task's rows in cache across b
  const int64_t nblk = (qi + kBlock - 1) / kBlock, tasks = np * nq * nblk;
  // Accumulate: the positions b grouped by target (stable, so each group stays in index order), each
  // group summed in the accumulate type and rounded once (Note [Index accumulate]).
  std::vector<int64_t> order, runs;
  if (accumulate) {
    order.resize(static_cast<size_t>(nb));
    std::iota(order.begin(), order.end(), int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return mid[x] < mid[y]; });
    for (int64_t k = 0; k < nb; ++k)
      if (k == 0 || mid[order[k]] != mid[order[k - 1]]) runs.push_back(k);
    runs.push_back(nb);
  }
  dispatch_dtype(self.dtype(), plan.op, [&]<class T>(TypeTag<T>) {
    using A = acc_t<T>;
    const A a = alpha.to<A>();
    T* dst = static_cast<T*>(self.data_ptr());
    const T* val = static_cast<const T*>(values.data_ptr());
    auto run = [&]<bool kAcc>(std::integral_constant<bool, kAcc>) {
#pragma omp parallel for schedule(static) if (tasks > 1 && tasks * nb * std::min(qi, kBlock) >= 16384)
      for (int64_t t = 0; t < tasks; ++t) {
        const int64_t blk = t % nblk, q = (t / nblk) % nq, p = t / (nblk * nq);
        const int64_t i0 = blk * kBlock, i1 = std::min(qi, i0 + kBlock);
        if constexpr (kAcc) {
          A acc[kBlock];
          for (size_t r = 0; r + 1 < runs.size(); ++r) {
            T* d = dst + dpre[p] + mid[order[runs[r]]] + douter[q];
            for (int64_t i = i0; i < i1; ++i) acc[i - i0] = static_cast<A>(d[i * ds]);
            for (int64_t k = runs[r]; k < runs[r + 1]; ++k) {
              const T* v = val + vpre[p] + vmid[order[k]] + vouter[q];
              if (vst == 1) {
                for (int64_t i = i0; i < i1; ++i) acc[i - i0] += a * static_cast<A>(v[i]);
              } else {
                for (int64_t i = i0; i < i1; ++i) acc[i - i0] += a * static_cast<A>(v[i * vst]);
              }
            }
            for (int64_t i = i0; i < i1; ++i) d[i * ds] = convert<T>(acc[i - i0]);
          }
          continue;
        }
        for (int64_t b = 0; b < nb; ++b) {  // serial in index order: the last write wins
          T* d = dst + dpre[p] + mid[b] + douter[q];
          const T* v = val + vpre[p] + vmid[b] + vouter[q];
          {
            if (ds == 1 && vst == 1) {
              for (int64_t i = i0; i < i1; ++i) d[i] = v[i];
            } else {
              for (int64_t i = i0; i < i1; ++i) d[i * ds] = v[i * vst];
            }
          }
        }
      }
    };
    if (accumulate) run(std::true_type{});
    else run(std::false_type{});
  });
}

}  // namespace

void register_advanced_index() {
  index_kernel.set(DeviceType::CPU, &index_cpu);
  index_put_kernel.set(DeviceType::CPU, &index_put_cpu);
}

}  // namespace tessera::cpu
