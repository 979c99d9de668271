// CPU reduction engine: sum, mean, prod, max, min, any, all and the vector norms over any set of
// trailing dims of a strided (kept..., reduced...) input (Note [Reduction layout]).
//
// Two traversals, chosen from the strides, cover the common layouts without a copy:
//  * inner: each output folds its reduced elements; runs along the innermost reduced dim are
//    accumulated in several independent lanes (so the loop vectorizes without -ffast-math), and the
//    lanes and leaves combine by the tree of Note [Reduction tree];
//  * outer: when the innermost kept dim is unit-stride (e.g. summing a row-major matrix over dim
//    0), a tile of neighbouring outputs advances together, one reduced "row" at a time.
// Parallelism: over outputs (or tiles) when there are enough of them, otherwise over chunks of the
// reduced range whose partial results fold by the same tree, so results never depend on threads.
#include <limits>

#include "kernels/cpu/convert.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/reduce_common.h"
#include "kernels/cpu/reduce_cpu.h"
#include "ops/reduce_kernel.h"

namespace tessera::cpu::inline TS_CPU_ISA {  // Note [ISA namespaces]
namespace {

template <class A>
inline A add_wrap(A a, A b) {
  if constexpr (std::is_integral_v<A> && std::is_signed_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return static_cast<A>(a + b);
  }
}

template <class A>
inline A mul_wrap(A a, A b) {
  if constexpr (std::is_integral_v<A> && std::is_signed_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return static_cast<A>(a * b);
  }
}

template <class A> inline A nan_max(A a, A b) { return (a > b || is_nan(a)) ? a : b; }
template <class A> inline A nan_min(A a, A b) { return (a < b || is_nan(a)) ? a : b; }
template <class V> inline V abs_of(V x) {
  if constexpr (std::is_floating_point_v<V>) return std::fabs(x);
  else return x;
}

// The operations: init (identity), map (element -> accumulator), combine, finish (accumulator and
// the number of reduced elements -> result, still in the accumulator type).
template <class V, class A>
struct SumOp {
  using acc_t = A;
  A init() const { return A(0); }
  A map(V x) const { return static_cast<A>(x); }
  A combine(A a, A b) const { return add_wrap(a, b); }
  A finish(A a, int64_t) const { return a; }
};
template <class V, class A>
struct MeanOp : SumOp<V, A> {
  A finish(A a, int64_t n) const { return a / static_cast<A>(n); }
};
template <class V, class A>
struct ProdOp {
  using acc_t = A;
  A init() const { return A(1); }
  A map(V x) const { return static_cast<A>(x); }
  A combine(A a, A b) const { return mul_wrap(a, b); }
  A finish(A a, int64_t) const { return a; }
};
template <class V, class A>
struct MaxOp {
  using acc_t = A;
  A init() const {
    return std::numeric_limits<A>::has_infinity ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::lowest();
  }
  A map(V x) const { return static_cast<A>(x); }
  A combine(A a, A b) const { return nan_max(a, b); }
  A finish(A a, int64_t) const { return a; }
};
template <class V, class A>
struct MinOp {
  using acc_t = A;
  A init() const {
    return std::numeric_limits<A>::has_infinity ? std::numeric_limits<A>::infinity() : std::numeric_limits<A>::max();
  }
  A map(V x) const { return static_cast<A>(x); }
  A combine(A a, A b) const { return nan_min(a, b); }
  A finish(A a, int64_t) const { return a; }
};
template <class V, bool IsAny>
struct AnyAllOp {
  using acc_t = uint8_t;
  uint8_t init() const { return IsAny ? 0 : 1; }
  uint8_t map(V x) const { return x != V(0) ? 1 : 0; }
  uint8_t combine(uint8_t a, uint8_t b) const { return IsAny ? (a | b) : (a & b); }
  uint8_t finish(uint8_t a, int64_t) const { return a; }
};
template <class V, class A>
struct NormL0Op : SumOp<V, A> {
  A map(V x) const { return x != V(0) ? A(1) : A(0); }
};
template <class V, class A>
struct NormL1Op : SumOp<V, A> {
  A map(V x) const { return static_cast<A>(std::fabs(x)); }
};
template <class V, class A>
struct NormL2Op : SumOp<V, A> {
  A map(V x) const { return static_cast<A>(x) * static_cast<A>(x); }
  A finish(A a, int64_t) const { return std::sqrt(a); }
};
template <class V, class A>
struct NormInfOp {
  using acc_t = A;
  A init() const { return A(0); }
  A map(V x) const { return static_cast<A>(std::fabs(x)); }
  A combine(A a, A b) const { return nan_max(a, b); }
  A finish(A a, int64_t) const { return a; }
};
template <class V, class A>
struct NormNegInfOp {
  using acc_t = A;
  A init() const { return std::numeric_limits<A>::infinity(); }
  A map(V x) const { return static_cast<A>(std::fabs(x)); }
  A combine(A a, A b) const { return nan_min(a, b); }
  A finish(A a, int64_t n) const { return n == 0 ? A(0) : a; }  // torch.norm gives 0 when empty
};
template <class V, class A>
struct NormPOp : SumOp<V, A> {
  A p;
  explicit NormPOp(double pp) : p(static_cast<A>(pp)) {}
  A map(V x) const { return std::pow(static_cast<A>(std::fabs(x)), p); }
  A finish(A a, int64_t) const { return std::pow(a, A(1) / p); }
};

template <class T, class OutT, class Op>
class Reducer {
  using V = load_t<T>;
  using A = typename Op::acc_t;
  static constexpr int kLanes = std::min<int>(32, static_cast<int>(128 / sizeof(A)));
  static constexpr int64_t kLeaf = 4096;             // inner traversal: elements per leaf
  static constexpr int64_t kChunk = kLeaf * 16;      // inner traversal: elements per parallel chunk
  static constexpr int kTile = 4096;                 // outer traversal: outputs advancing together
  static constexpr int64_t kLeafRows = 16;           // outer traversal: rows per leaf
  static constexpr int kWiden = 256;                 // 16-bit floats are widened in blocks this long

 public:
  Reducer(const Tensor& out, const Tensor& in, int64_t nreduce, Op op)
      : op_(op), out_(static_cast<OutT*>(out.data_ptr())), base_(static_cast<const T*>(in.data_ptr())) {
    const int nk = static_cast<int>(in.dim() - nreduce);
    kept_ = make_group(in.sizes().data(), in.strides().data(), nk);
    red_ = make_group(in.sizes().data() + nk, in.strides().data() + nk, static_cast<int>(nreduce));
  }

  void run() const {
    const int64_t O = kept_.numel, R = red_.numel;
    if (O == 0) return;
    if (R == 0) {
      const OutT v = finalize(op_.init(), 0);
      for (int64_t o = 0; o < O; ++o) out_[o] = v;
      return;
    }
    const bool outer = kept_.n > 0 && kept_.inner_stride() == 1 && kept_.inner_size() > 1 &&
                       (red_.n == 0 || red_.inner_stride() != 1);
    if (!outer) {
      run_inner();
    } else if (kept_.inner_size() <= kLanes && kLanes % kept_.inner_size() == 0 && red_.n == 1 &&
               red_.stride[0] == kept_.inner_size()) {
      run_columns();
    } else {
      run_outer();
    }
  }

 private:
  OutT finalize(A a, int64_t n) const { return convert<OutT>(op_.finish(a, n)); }

  // ---- inner traversal ---------------------------------------------------------------------------
  template <class U>
  void lanes_contig(const U* p, int64_t n, A* io) const {
    A acc[kLanes];
    for (int j = 0; j < kLanes; ++j) acc[j] = io[j];
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int j = 0; j < kLanes; ++j) acc[j] = op_.combine(acc[j], op_.map(static_cast<V>(p[i + j])));
    for (int j = 0; i < n; ++i, ++j) acc[j] = op_.combine(acc[j], op_.map(static_cast<V>(p[i])));
    for (int j = 0; j < kLanes; ++j) io[j] = acc[j];
  }

  void lanes_run(const T* p, int64_t n, int64_t st, A* acc) const {
    if (st == 1) {
      if constexpr (is_16bit_float_v<T>) {
        float buf[kWiden];
        for (int64_t i = 0; i < n; i += kWiden) {
          const int64_t m = std::min<int64_t>(kWiden, n - i);
          widen(p + i, m, buf);
          lanes_contig(buf, m, acc);
        }
      } else {
        lanes_contig(p, n, acc);
      }
      return;
    }
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
      for (int j = 0; j < 4; ++j) acc[j] = op_.combine(acc[j], op_.map(static_cast<V>(p[(i + j) * st])));
    for (; i < n; ++i) acc[0] = op_.combine(acc[0], op_.map(static_cast<V>(p[i * st])));
  }

  A leaf_inner(const T* p, int64_t r0, int64_t r1) const {
    A acc[kLanes];
    for (int j = 0; j < kLanes; ++j) acc[j] = op_.init();
    for_each_run(red_, r0, r1, [&](int64_t off, int64_t len, int64_t st) { lanes_run(p + off, len, st, acc); });
    for (int w = kLanes / 2; w > 0; w /= 2)
      for (int j = 0; j < w; ++j) acc[j] = op_.combine(acc[j], acc[j + w]);
    return acc[0];
  }

  A tree_inner(const T* p, int64_t r0, int64_t r1) const {
    const int64_t n = r1 - r0;
    if (n <= kLeaf) return leaf_inner(p, r0, r1);
    const int64_t m = tree_split(n, kLeaf);
    // Left before right, explicitly: argument evaluation order is unspecified, and walking memory
    // backwards block by block halves the bandwidth the prefetchers deliver.
    const A left = tree_inner(p, r0, r0 + m);
    const A right = tree_inner(p, r0 + m, r1);
    return op_.combine(left, right);
  }

  void run_inner() const {
    const int64_t O = kept_.numel, R = red_.numel;
    const int nt = max_threads();
    if (nt == 1 || O >= 2 * nt || R < 2 * kChunk) {
      const bool par = nt > 1 && O > 1 && O * R >= 32768;
#pragma omp parallel for schedule(static) if (par)
      for (int64_t o = 0; o < O; ++o) out_[o] = finalize(tree_inner(base_ + kept_.offset(o), 0, R), R);
      return;
    }
    // Few outputs, long reductions: chunks of each output's range in parallel, folded in order.
    const int64_t nc = ceil_div(R, kChunk);
    std::vector<A> part(static_cast<size_t>(O * nc));
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < O * nc; ++t) {
      const int64_t o = t / nc, c = t % nc;
      part[t] = tree_inner(base_ + kept_.offset(o), c * kChunk, std::min(R, (c + 1) * kChunk));
    }
    auto comb = [this](A a, A b) { return op_.combine(a, b); };
    for (int64_t o = 0; o < O; ++o) out_[o] = finalize(fold_partials(part.data() + o * nc, nc, comb), R);
  }

  // ---- narrow outer traversal ------------------------------------------------------------------------
  // Rows of W contiguous outputs (W divides the lane count) stored back to back: the block is one
  // contiguous run, accumulated by the inner traversal's lanes, lane j holding column j % W.
  void fold_columns(A* acc, int64_t W, A* res) const {
    for (int64_t w = kLanes / 2; w >= W; w /= 2)
      for (int64_t j = 0; j < w; ++j) acc[j] = op_.combine(acc[j], acc[j + w]);
    for (int64_t c = 0; c < W; ++c) res[c] = acc[c];
  }

  // res[0, W) = the reduction of the elements [e0, e1) of the block at p (e0, e1 multiples of W).
  void tree_columns(const T* p, int64_t e0, int64_t e1, int64_t W, A* res) const {
    const int64_t n = e1 - e0;
    if (n <= kLeaf) {
      A acc[kLanes];
      for (int j = 0; j < kLanes; ++j) acc[j] = op_.init();
      lanes_run(p + e0, n, 1, acc);
      fold_columns(acc, W, res);
      return;
    }
    const int64_t m = tree_split(n, kLeaf);
    tree_columns(p, e0, e0 + m, W, res);
    A tmp[kLanes];
    tree_columns(p, e0 + m, e1, W, tmp);
    for (int64_t c = 0; c < W; ++c) res[c] = op_.combine(res[c], tmp[c]);
  }

  void run_columns() const {
    const int64_t W = kept_.inner_size(), E = red_.numel * W;
    const DimGroup kq = kept_.outer();
    const int64_t Q = kq.numel;
    const int nt = max_threads();
    if (nt == 1 || Q >= 2 * nt || E < 2 * kChunk) {
      const bool par = nt > 1 && Q > 1 && Q * E >= 32768;
#pragma omp parallel for schedule(static) if (par)
      for (int64_t q = 0; q < Q; ++q) {
        A res[kLanes];
        tree_columns(base_ + kq.offset(q), 0, E, W, res);
        for (int64_t c = 0; c < W; ++c) out_[q * W + c] = finalize(res[c], red_.numel);
      }
      return;
    }
    const int64_t nc = ceil_div(E, kChunk);  // kChunk is a multiple of every W that gets here
    std::vector<A> part(static_cast<size_t>(Q * nc * W));
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < Q * nc; ++t) {
      const int64_t q = t / nc, c = t % nc;
      tree_columns(base_ + kq.offset(q), c * kChunk, std::min(E, (c + 1) * kChunk), W, part.data() + t * W);
    }
    auto comb = [this](A a, A b) { return op_.combine(a, b); };
    std::vector<A> col(static_cast<size_t>(nc));
    for (int64_t q = 0; q < Q; ++q)
      for (int64_t c = 0; c < W; ++c) {
        for (int64_t k = 0; k < nc; ++k) col[k] = part[(q * nc + k) * W + c];
        out_[q * W + c] = finalize(fold_partials(col.data(), nc, comb), red_.numel);
      }
  }

  // ---- outer traversal ---------------------------------------------------------------------------
  // A tile is up to kTile neighbouring outputs; reading whole tile-wide row segments in order keeps
  // the input stream sequential. Partial results of the tree's levels live in `scratch`, one
  // tile-wide buffer per level (a thread's own), so the tree costs no stack.
  void row(const T* p, int64_t w, A* __restrict acc) const {
    if constexpr (is_16bit_float_v<T>) {
      float buf[kWiden];
      for (int64_t i0 = 0; i0 < w; i0 += kWiden) {
        const int64_t m = std::min<int64_t>(kWiden, w - i0);
        widen(p + i0, m, buf);
        for (int64_t i = 0; i < m; ++i) acc[i0 + i] = op_.combine(acc[i0 + i], op_.map(buf[i]));
      }
    } else {
      for (int64_t i = 0; i < w; ++i) acc[i] = op_.combine(acc[i], op_.map(static_cast<V>(p[i])));
    }
  }

  // acc[0, w) = the reduction of rows [r0, r1) of the tile at p.
  void tree_outer(const T* p, int64_t r0, int64_t r1, int64_t w, A* acc, A* scratch) const {
    const int64_t n = r1 - r0;
    if (n <= kLeafRows) {
      for (int64_t i = 0; i < w; ++i) acc[i] = op_.init();
      for_each_run(red_, r0, r1, [&](int64_t off, int64_t len, int64_t st) {
        for (int64_t k = 0; k < len; ++k) row(p + off + k * st, w, acc);
      });
      return;
    }
    const int64_t m = tree_split(n, kLeafRows);
    tree_outer(p, r0, r0 + m, w, acc, scratch);
    tree_outer(p, r0 + m, r1, w, scratch, scratch + kTile);
    for (int64_t i = 0; i < w; ++i) acc[i] = op_.combine(acc[i], scratch[i]);
  }

  static int64_t tree_levels(int64_t rows) {
    int64_t levels = 1;
    for (int64_t r = kLeafRows; r < rows; r *= 2) ++levels;
    return levels;
  }

  void run_outer() const {
    const int64_t R = red_.numel, W = kept_.inner_size(), tiles = ceil_div(W, kTile);
    const int64_t tw = std::min<int64_t>(kTile, W);  // the widest tile
    const DimGroup kq = kept_.outer();
    const int64_t G = kq.numel * tiles;
    auto tile_of = [&](int64_t g, const T*& p, int64_t& o0, int64_t& w) {
      const int64_t q = g / tiles, t = g % tiles;
      p = base_ + kq.offset(q) + t * kTile;
      o0 = q * W + t * kTile;
      w = std::min<int64_t>(kTile, W - t * kTile);
    };
    // Chunks of at least 256K elements, a power-of-two multiple of the leaf (Note [Reduction tree]).
    int64_t chunk_rows = kLeafRows;
    while (chunk_rows * tw < (int64_t{1} << 18)) chunk_rows *= 2;
    const int nt = max_threads();
    if (nt == 1 || G >= 2 * nt || R < 2 * chunk_rows) {
      const bool par = nt > 1 && G > 1 && kept_.numel * R >= 32768;
#pragma omp parallel if (par)
      {
        std::vector<A> buf(static_cast<size_t>((tree_levels(R) + 1) * kTile));
#pragma omp for schedule(static)
        for (int64_t g = 0; g < G; ++g) {
          const T* p;
          int64_t o0, w;
          tile_of(g, p, o0, w);
          tree_outer(p, 0, R, w, buf.data(), buf.data() + kTile);
          for (int64_t i = 0; i < w; ++i) out_[o0 + i] = finalize(buf[i], R);
        }
      }
      return;
    }
    // Few tiles, many rows: chunks of rows in parallel, then the chunk results of each tile fold in
    // place by the same tree (left block's row absorbs the right block's).
    const int64_t nc = ceil_div(R, chunk_rows);
    std::vector<A> part(static_cast<size_t>(G * nc * tw));
#pragma omp parallel
    {
      std::vector<A> buf(static_cast<size_t>(tree_levels(chunk_rows) * kTile));
#pragma omp for schedule(static)
      for (int64_t t = 0; t < G * nc; ++t) {
        const int64_t g = t / nc, c = t % nc;
        const T* p;
        int64_t o0, w;
        tile_of(g, p, o0, w);
        tree_outer(p, c * chunk_rows, std::min(R, (c + 1) * chunk_rows), w, part.data() + t * tw, buf.data());
      }
      // Each thread folds a slice of every tile's columns.
#pragma omp for schedule(static)
      for (int64_t s = 0; s < G * ceil_div(tw, 64); ++s) {
        const int64_t g = s / ceil_div(tw, 64), i0 = (s % ceil_div(tw, 64)) * 64;
        const T* p;
        int64_t o0, w;
        tile_of(g, p, o0, w);
        if (i0 >= w) continue;
        A* rows0 = part.data() + g * nc * tw + i0;
        fold_rows(rows0, nc, tw, std::min<int64_t>(64, w - i0));
        for (int64_t i = 0; i < std::min<int64_t>(64, w - i0); ++i) out_[o0 + i0 + i] = finalize(rows0[i], R);
      }
    }
  }

  // Folds n rows (stride `stride`, width w) into the first, by the tree of fold_partials.
  void fold_rows(A* rows, int64_t n, int64_t stride, int64_t w) const {
    if (n == 1) return;
    const int64_t m = tree_split(n, 1);
    fold_rows(rows, m, stride, w);
    fold_rows(rows + m * stride, n - m, stride, w);
    const A* right = rows + m * stride;
    for (int64_t i = 0; i < w; ++i) rows[i] = op_.combine(rows[i], right[i]);
  }

  Op op_;
  OutT* out_;
  const T* base_;
  DimGroup kept_, red_;
};

template <class T, class OutT, class Op>
void reduce_with(const Tensor& out, const Tensor& in, int64_t nreduce, Op op) {
  Reducer<T, OutT, Op>(out, in, nreduce, op).run();
}

template <template <class, class> class OpT>
void reduce_floating(const char* name, const Tensor& out, const Tensor& in, int64_t nreduce) {
  dispatch_floating(in.dtype(), name, [&]<class T>(TypeTag<T>) {
    reduce_with<T, T>(out, in, nreduce, OpT<load_t<T>, acc_t<T>>{});
  });
}

void reduce_cpu(const Tensor& out, const Tensor& in, int64_t nreduce, const ReduceParams& prm) {
  switch (prm.op) {
    case ReduceOp::Sum:
      if (out.dtype() != in.dtype()) {  // integers and bool accumulate straight into int64
        dispatch_dtype<DTypeSet::IntegralAndBool>(in.dtype(), "sum", [&]<class T>(TypeTag<T>) {
          reduce_with<T, int64_t>(out, in, nreduce, SumOp<T, int64_t>{});
        });
        return;
      }
      dispatch_dtype<DTypeSet::AllNoBool>(in.dtype(), "sum", [&]<class T>(TypeTag<T>) {
        reduce_with<T, T>(out, in, nreduce, SumOp<load_t<T>, acc_t<T>>{});
      });
      return;
    case ReduceOp::Prod:
      if (out.dtype() != in.dtype()) {
        dispatch_dtype<DTypeSet::IntegralAndBool>(in.dtype(), "prod", [&]<class T>(TypeTag<T>) {
          reduce_with<T, int64_t>(out, in, nreduce, ProdOp<T, int64_t>{});
        });
        return;
      }
      dispatch_dtype<DTypeSet::AllNoBool>(in.dtype(), "prod", [&]<class T>(TypeTag<T>) {
        reduce_with<T, T>(out, in, nreduce, ProdOp<load_t<T>, acc_t<T>>{});
      });
      return;
    case ReduceOp::Mean: reduce_floating<MeanOp>("mean", out, in, nreduce); return;
    case ReduceOp::Max:
    case ReduceOp::Min: {
      const bool is_max = prm.op == ReduceOp::Max;
      if (in.dtype() == kBool) {  // the max of bools is any, the min is all
        if (is_max) reduce_with<bool, bool>(out, in, nreduce, AnyAllOp<bool, true>{});
        else reduce_with<bool, bool>(out, in, nreduce, AnyAllOp<bool, false>{});
        return;
      }
      dispatch_dtype<DTypeSet::AllNoBool>(in.dtype(), is_max ? "amax" : "amin", [&]<class T>(TypeTag<T>) {
        if (is_max) reduce_with<T, T>(out, in, nreduce, MaxOp<load_t<T>, acc_t<T>>{});
        else reduce_with<T, T>(out, in, nreduce, MinOp<load_t<T>, acc_t<T>>{});
      });
      return;
    }
    case ReduceOp::Any:
    case ReduceOp::All: {
      const bool is_any = prm.op == ReduceOp::Any;
      dispatch_dtype(in.dtype(), is_any ? "any" : "all", [&]<class T>(TypeTag<T>) {
        if (is_any) reduce_with<T, bool>(out, in, nreduce, AnyAllOp<load_t<T>, true>{});
        else reduce_with<T, bool>(out, in, nreduce, AnyAllOp<load_t<T>, false>{});
      });
      return;
    }
    case ReduceOp::NormL0: reduce_floating<NormL0Op>("norm", out, in, nreduce); return;
    case ReduceOp::NormL1: reduce_floating<NormL1Op>("norm", out, in, nreduce); return;
    case ReduceOp::NormL2: reduce_floating<NormL2Op>("norm", out, in, nreduce); return;
    case ReduceOp::NormInf: reduce_floating<NormInfOp>("norm", out, in, nreduce); return;
    case ReduceOp::NormNegInf: reduce_floating<NormNegInfOp>("norm", out, in, nreduce); return;
    case ReduceOp::NormP:
      dispatch_floating(in.dtype(), "norm", [&]<class T>(TypeTag<T>) {
        reduce_with<T, T>(out, in, nreduce, NormPOp<load_t<T>, acc_t<T>>(prm.p));
      });
      return;
  }
}

}  // namespace

void register_reduce() {
  reduce_kernel.set(DeviceType::CPU, &reduce_cpu);
  register_reduce_rows();
  register_scan();
}

}  // namespace tessera::cpu::TS_CPU_ISA
