// The gemm slot's batched, strided GEMM through oneDNN's matmul primitive, for the dtypes of
// Note [oneDNN where it wins] (onednn.h): C[i] = alpha * A[i] @ B[i] + beta * C[i] (+ bias).
//
// Operands are passed in their own strides (no copy): oneDNN's matmul reads a matrix row-major or
// column-major with any leading dimension, and a batch stride of 0 (a broadcast operand) becomes a
// batch of 1, which oneDNN broadcasts. alpha is the primitive's output scale and beta its sum post-op;
// the bias (n) is its bias argument, broadcast over the rows. Layouts it cannot read (a step in both
// inner dims, C not expressible) and shapes oneDNN has no kernel for go native.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/onednn/context.h"
#include "kernels/cpu/onednn/onednn.h"
#include "tensor/tensor_impl.h"

namespace tessera::cpu::onednn {
namespace {

using dnnl::memory;

// Note [oneDNN where it wins]: which products go to oneDNN: those of at least kMinWork multiply-adds
// in all (below it, oneDNN's gain is small on a quiet machine and its loss large on a busy one).
constexpr double kMinWork = double(int64_t(1) << 20);

bool takes(const GemmParams& p) {
  if (!onednn_enabled() || p.k() == 0 || !to_dnnl(p.c.dtype())) return false;
  if (everywhere()) return true;
  return double(p.batch()) * double(p.m()) * double(p.n()) * double(p.k()) >= kMinWork;
}

// A (batch, rows, cols) operand's dims and strides for oneDNN, or nullopt when a matrix of it is not
// row- or column-major with some leading dimension.
struct Layout {
  memory::dims dims, strides;
};
std::optional<Layout> layout(const Tensor& t, bool written) {
  const int64_t b = t.size(0), r = t.size(1), c = t.size(2);
  int64_t sb = t.stride(0), sr = t.stride(1), sc = t.stride(2);
  // Size-1 dims may carry any stride: give them the dense one so that oneDNN sees a plain layout.
  if (c == 1) sc = sr == 1 ? std::max<int64_t>(r, 1) : 1;
  if (r == 1) sr = sc == 1 ? std::max<int64_t>(c, 1) : 1;
  const bool row_major = sc == 1 && sr >= c, col_major = sr == 1 && sc >= r;
  if (!row_major && !col_major) return std::nullopt;
  const bool broadcast = b > 1 && sb == 0;
  if (broadcast && written) return std::nullopt;
  if (b == 1 || broadcast) sb = row_major ? r * sr : c * sc;
  return Layout{{broadcast ? 1 : b, r, c}, {sb, sr, sc}};
}

struct Entry {
  bool ok = false;
  dnnl::matmul prim;
};

}  // namespace

bool gemm(const GemmParams& p) {
  if (!takes(p)) return false;
  const auto a = layout(p.a, false), b = layout(p.b, false), c = layout(p.c, true);
  if (!a || !b || !c) return false;
  const bool has_bias = p.bias.defined();
  if (has_bias && p.n() > 1 && p.bias.stride(0) != 1) return false;  // a broadcast or strided bias
  const double alpha = p.alpha.to_double(), beta = p.beta.to_double();
  const memory::data_type dt = *to_dnnl(p.c.dtype());
  const memory::desc ad(a->dims, dt, a->strides), bd(b->dims, dt, b->strides), cd(c->dims, dt, c->strides);
  const memory::desc biasd =
      has_bias ? memory::desc({1, 1, p.n()}, dt, {p.n(), p.n(), 1}) : memory::desc();

  Key key;
  key.add(int64_t(p.c.dtype())).add(a->dims).add(a->strides).add(b->dims).add(b->strides).add(c->dims).add(c->strides);
  key.add(has_bias);
  int64_t ab[2];
  std::memcpy(&ab[0], &alpha, 8);
  std::memcpy(&ab[1], &beta, 8);
  key.add(ab[0]).add(ab[1]);
  static PrimitiveCache<Entry> cache;  // Note [oneDNN primitive cache]
  auto e = cache.get(key, [&] {
    auto entry = std::make_shared<Entry>();
    try {
      dnnl::primitive_attr attr;
      if (alpha != 1.0) attr.set_output_scales(0, {float(alpha)});
      if (beta != 0.0) {
        dnnl::post_ops po;
        po.append_sum(float(beta));
        attr.set_post_ops(po);
      }
      dnnl::matmul::desc md = has_bias ? dnnl::matmul::desc(ad, bd, biasd, cd) : dnnl::matmul::desc(ad, bd, cd);
      dnnl::matmul::primitive_desc pd(md, attr, engine());
      entry->prim = dnnl::matmul(pd);
      entry->ok = true;
    } catch (const dnnl::error&) {
      entry->ok = false;  // no kernel for this layout: the native path runs it
    }
    return std::shared_ptr<const Entry>(entry);
  });
  if (!e->ok) return false;
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, wrap(ad, p.a)}, {DNNL_ARG_WEIGHTS, wrap(bd, p.b)},
                                       {DNNL_ARG_DST, wrap(cd, p.c)}};
  if (has_bias) args.emplace(DNNL_ARG_BIAS, wrap(biasd, p.bias));
  e->prim.execute(stream(), args);
  stream().wait();
  count_call();
  return true;
}

}  // namespace tessera::cpu::onednn
