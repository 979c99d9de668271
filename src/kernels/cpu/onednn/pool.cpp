// Pooling through oneDNN: max_pool2d forward and backward, avg_pool2d and adaptive_avg_pool2d forward
// and backward, float32 and bfloat16, NCHW and channels-last, for the classes of
// Note [oneDNN where it wins] (onednn.h). Everything else, and every call these decline, runs the
// native kernels of kernels/cpu/pool.cpp, which stay the reference.
//
// Layouts: the primitives read and write the tensors in place, as nchw or nhwc (the layout of `out`;
// an input of another layout is first made dense in that one, as the native kernels do with theirs).
// Geometry as in conv.cpp: dilation - 1, and a right padding that gives tessera's output size
// (ceil_mode's overhang is right padding that no tap reads).
//
// Note [oneDNN max pooling indices]: tessera's max_pool2d returns PyTorch's indices (int64, the flat
// position h * W + w in the plane) and its backward scatters through indices a caller may have made;
// oneDNN's max pooling keeps instead a workspace (u8 or s32, one per output, in the output's layout)
// holding the tap's number kh * KW + kw in its window, counted from the window's padded start. The
// workspace's content is oneDNN's implementation detail, not its API, so both directions check what
// they rely on: the primitive's workspace must be that dense u8 / s32 tensor (else the call goes
// native), and tests/kernels/test_onednn_pool.cpp compares the indices with the native ones over
// padding, dilation, strides and ceil_mode.
//  - forward: oneDNN writes the values and the workspace; one pass turns each tap number into the
//    index (a table of KH * KW offsets added to the window's start). oneDNN differs from PyTorch in two
//    places, both handled: it skips NaN (PyTorch's max is NaN, its index the last NaN's), so an input
//    holding a NaN goes native (one read of the input, before the primitive runs); and it starts a
//    window at the dtype's lowest finite value, so a window of -inf only reports that value (and tap 0,
//    which may be padding) -- such windows (an output at or below the lowest finite value) are done
//    again by definition in the index pass: -inf at the first in-bounds tap, as PyTorch.
//  - backward: the indices are turned back into tap numbers: an index must lie in its own window and
//    on one of its in-bounds taps (a table of tap offsets from the window's start, and the window's
//    in-bounds taps); an index anywhere else, which the public max_pool2d_backward accepts (scattering
//    to it), sends the call native, as does an index outside the plane (whose error the native kernel
//    raises). Ties are first-in-window-order in both (strict comparison), so the forward's indices are
//    native's.
//
// Average pooling: count_include_pad is oneDNN's pooling_avg_include_padding (divisor KH * KW) when no
// window reaches past the right padding into ceil_mode's overhang (PyTorch's divisor stops at the
// padding), native otherwise; count_include_pad=false is pooling_avg_exclude_padding, which counts the
// in-bounds taps as PyTorch does. adaptive_avg_pool2d goes through oneDNN where its windows are a
// regular pooling (the input's sizes multiples of the output's: kernel = stride = H / OH, as PyTorch's
// start = floor(o * H / OH), end = ceil((o + 1) * H / OH) then give), native otherwise.
// bfloat16 accumulates a window in float32 inside oneDNN and rounds once, as the native kernels; but
// where windows overlap, oneDNN's backward rounds each window's addition to an input gradient to
// bfloat16 in turn, where the native kernels (as PyTorch) add in float32 and round once: a bfloat16
// backward of overlapping windows (3x3 with stride 2, say) goes native.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/cpu/onednn/context.h"
#include "kernels/cpu/onednn/onednn.h"
#include "tensor/tensor_impl.h"

namespace tessera::cpu::onednn {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

enum class PoolOp { max_forward, max_backward, avg_forward, avg_backward, adaptive_forward, adaptive_backward };

// The native max pooling's fast path (kernels/cpu/pool.cpp's windows_inside): every window inside the
// plane, no padding, no dilation, no ceil_mode overhang.
bool windows_inside(const PoolGeometry& g) {
  return g.pad_h == 0 && g.pad_w == 0 && g.dil_h == 1 && g.dil_w == 1 &&
         (g.out_h - 1) * g.stride_h + g.kernel_h <= g.in_h && (g.out_w - 1) * g.stride_w + g.kernel_w <= g.in_w;
}

// Which pooling calls go to oneDNN (Note [oneDNN where it wins]): channels-last max pooling, where the
// native kernels copy to NCHW and back; NCHW max pooling forward in bfloat16, and in float32 where
// the native kernel's general path runs (windows reaching into the padding); average and adaptive
// average pooling everywhere. The NCHW max pooling backward stays native.
bool rule(PoolOp op, bool channels_last, DType dt, const PoolGeometry& g) {
  switch (op) {
    case PoolOp::max_forward: return channels_last || dt == kBFloat16 || !windows_inside(g);
    case PoolOp::max_backward: return channels_last;
    default: return true;
  }
}

bool takes(PoolOp op, const Tensor& out, bool channels_last, const PoolGeometry& g) {
  if (!onednn_enabled() || !to_dnnl(out.dtype()) || out.numel() == 0) return false;
  return everywhere() || rule(op, channels_last, out.dtype(), g);
}

bool is_channels_last(const Tensor& t) { return !t.is_contiguous() && t.is_contiguous(MemoryFormat::ChannelsLast); }

// The layout a call runs in: the result's, or where the result is dense in both (a 1 x 1 output, one
// channel) the other operand's, so that a channels-last input is not copied to NCHW for nothing.
bool runs_channels_last(const Tensor& out, const Tensor& other) {
  if (is_channels_last(out)) return true;
  return out.is_contiguous(MemoryFormat::ChannelsLast) && is_channels_last(other);
}

Tensor dense_in(const Tensor& t, bool channels_last) {
  return channels_last ? t.contiguous(MemoryFormat::ChannelsLast) : t.contiguous();
}

struct Dims {
  memory::dims src, dst, kernel, strides, dilation, pad_l, pad_r;
};

// The oneDNN form of g over n images of c channels, or nullopt when no right padding >= 0 gives its
// output size.
std::optional<Dims> dnnl_dims(int64_t n, int64_t c, const PoolGeometry& g) {
  auto right = [](int64_t in, int64_t out, int64_t k, int64_t s, int64_t d, int64_t pl) -> std::optional<int64_t> {
    const int64_t ext = (k - 1) * d + 1;
    const int64_t pr = std::max<int64_t>((out - 1) * s + ext - in - pl, 0);
    if (in + pl + pr < ext || (in + pl + pr - ext) / s + 1 != out) return std::nullopt;
    return pr;
  };
  auto pr_h = right(g.in_h, g.out_h, g.kernel_h, g.stride_h, g.dil_h, g.pad_h);
  auto pr_w = right(g.in_w, g.out_w, g.kernel_w, g.stride_w, g.dil_w, g.pad_w);
  if (!pr_h || !pr_w) return std::nullopt;
  return Dims{{n, c, g.in_h, g.in_w},         {n, c, g.out_h, g.out_w}, {g.kernel_h, g.kernel_w},
              {g.stride_h, g.stride_w},       {g.dil_h - 1, g.dil_w - 1}, {g.pad_h, g.pad_w},
              {*pr_h, *pr_w}};
}

// The taps of one window axis that lie inside the input: [lo, hi) for output o.
struct TapRange {
  int64_t lo, hi;
};
std::vector<TapRange> tap_ranges(int64_t out, int64_t in, int64_t k, int64_t s, int64_t pad, int64_t d) {
  std::vector<TapRange> r(out);
  for (int64_t o = 0; o < out; ++o) {
    const int64_t start = o * s - pad;
    int64_t lo = 0, hi = k;
    while (lo < k && start + lo * d < 0) ++lo;
    while (hi > lo && start + (hi - 1) * d >= in) --hi;
    r[o] = {lo, hi};
  }
  return r;
}

// Every window of a max pooling has an in-bounds tap (with dilation one may lie wholly in the padding,
// where PyTorch's index points outside its window: that stays native).
bool windows_nonempty(const PoolGeometry& g) {
  for (const auto& r : tap_ranges(g.out_h, g.in_h, g.kernel_h, g.stride_h, g.pad_h, g.dil_h))
    if (r.lo >= r.hi) return false;
  for (const auto& r : tap_ranges(g.out_w, g.in_w, g.kernel_w, g.stride_w, g.pad_w, g.dil_w))
    if (r.lo >= r.hi) return false;
  return true;
}

enum class Kind { max_forward = 0, max_backward, avg_forward, avg_backward };

struct Entry {
  bool ok = false;
  memory::desc src, dst, ws;  // ws: max pooling's workspace, dense u8 or s32 in dst's layout
  dnnl::primitive prim;
};

Key make_key(Kind kind, DType dt, bool channels_last, bool include_pad, int64_t n, int64_t c, const PoolGeometry& g) {
  Key k;
  k.add(int64_t(kind)).add(int64_t(dt)).add(channels_last).add(include_pad).add(n).add(c);
  k.add({g.in_h, g.in_w, g.out_h, g.out_w, g.kernel_h, g.kernel_w, g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dil_h,
         g.dil_w});
  return k;
}

std::shared_ptr<const Entry> make_entry(Kind kind, memory::data_type dt, bool channels_last, bool include_pad,
                                        const Dims& D) {
  auto e = std::make_shared<Entry>();
  const tag t = channels_last ? tag::nhwc : tag::nchw;
  const bool max = kind == Kind::max_forward || kind == Kind::max_backward;
  // count_include_pad with the overhang of ceil_mode in the right padding: PyTorch's divisor differs.
  if (!max && include_pad && (D.pad_r[0] > D.pad_l[0] || D.pad_r[1] > D.pad_l[1])) return e;
  const auto algo = max           ? dnnl::algorithm::pooling_max
                    : include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                  : dnnl::algorithm::pooling_avg_exclude_padding;
  e->src = memory::desc(D.src, dt, t);
  e->dst = memory::desc(D.dst, dt, t);
  try {
    const bool training = kind != Kind::avg_forward;  // the backward primitives want a training hint
    dnnl::pooling_v2_forward::desc fd(training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference,
                                      algo, e->src, e->dst, D.strides, D.kernel, D.dilation, D.pad_l, D.pad_r);
    dnnl::pooling_v2_forward::primitive_desc fpd(fd, engine());
    if (fpd.src_desc() != e->src || fpd.dst_desc() != e->dst) return e;
    if (max) {
      e->ws = fpd.workspace_desc();
      const bool dense = e->ws == memory::desc(D.dst, memory::data_type::u8, t) ||
                         e->ws == memory::desc(D.dst, memory::data_type::s32, t);
      if (!dense) return e;  // Note [oneDNN max pooling indices]: a workspace this file cannot read
    }
    if (kind == Kind::max_forward || kind == Kind::avg_forward) {
      e->prim = dnnl::pooling_v2_forward(fpd);
    } else {
      dnnl::pooling_v2_backward::desc bd(algo, e->src, e->dst, D.strides, D.kernel, D.dilation, D.pad_l, D.pad_r);
      dnnl::pooling_v2_backward::primitive_desc bpd(bd, engine(), fpd);
      if (bpd.diff_src_desc() != e->src || bpd.diff_dst_desc() != e->dst) return e;
      if (max && bpd.workspace_desc() != e->ws) return e;
      e->prim = dnnl::pooling_v2_backward(bpd);
    }
    e->ok = true;
  } catch (const dnnl::error&) {
    e->ok = false;  // no implementation for this geometry: the native kernel runs it
  }
  return e;
}

// The cached primitive of a call over n x c planes, or null when the call goes native.
std::shared_ptr<const Entry> lookup(Kind kind, DType dt, bool channels_last, bool include_pad, int64_t n, int64_t c,
                                    const PoolGeometry& g) {
  static PrimitiveCache<Entry> cache[4];  // Note [oneDNN primitive cache]
  auto e = cache[int(kind)].get(make_key(kind, dt, channels_last, include_pad, n, c, g), [&] {
    auto D = dnnl_dims(n, c, g);
    const bool max = kind == Kind::max_forward || kind == Kind::max_backward;
    if (!D || (max && !windows_nonempty(g))) return std::make_shared<const Entry>();
    return make_entry(kind, *to_dnnl(dt), channels_last, include_pad, *D);
  });
  return e->ok ? e : nullptr;
}

void execute(const Entry& e, std::unordered_map<int, memory> args) {
  e.prim.execute(stream(), args);
  stream().wait();
  count_call();
}

// ---- Note [oneDNN max pooling indices] -----------------------------------------------------------

// Whether a dense float32 / bfloat16 tensor holds a NaN (exponent all ones, mantissa not zero).
bool has_nan(const Tensor& t) {
  const int64_t n = t.numel();
  unsigned found = 0;  // branch-free, so that the loop vectorizes
  if (t.dtype() == kFloat32) {
    const uint32_t* p = static_cast<const uint32_t*>(t.data_ptr());
#pragma omp parallel for reduction(| : found) if (n >= (int64_t(1) << 16))
    for (int64_t i = 0; i < n; ++i) found |= (p[i] & 0x7fffffffu) > 0x7f800000u;
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(t.data_ptr());
#pragma omp parallel for reduction(| : found) if (n >= (int64_t(1) << 16))
    for (int64_t i = 0; i < n; ++i) found |= unsigned((p[i] & 0x7fffu) > 0x7f80u);
  }
  return found != 0;
}

// A value of the dtype as float (float32 or bfloat16 bits).
float load(const void* base, DType dt, int64_t i) {
  if (dt == kFloat32) return static_cast<const float*>(base)[i];
  const uint32_t bits = uint32_t(static_cast<const uint16_t*>(base)[i]) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
void copy_element(void* dst, int64_t j, const void* src, int64_t i, DType dt) {
  if (dt == kFloat32) {
    static_cast<float*>(dst)[j] = static_cast<const float*>(src)[i];
  } else {
    static_cast<uint16_t*>(dst)[j] = static_cast<const uint16_t*>(src)[i];
  }
}
// The largest finite value of the dtype (bfloat16's 0x7f7f).
float max_finite(DType dt) { return dt == kFloat32 ? std::numeric_limits<float>::max() : 3.38953139e38f; }

// Element strides of (n, c, h, w) in a dense tensor of sizes (N, C, H, W) and the given layout.
struct Strides {
  int64_t n, c, h, w;
};
Strides strides_of(int64_t C, int64_t H, int64_t W, bool channels_last) {
  if (channels_last) return {H * W * C, 1, W * C, C};
  return {C * H * W, H * W, W, 1};
}

// Runs body(n, c, oh, ow, o) for every output (n, c, oh, ow), o its position in the dense output of
// that layout, in memory order, in parallel over the planes (NCHW) or the rows n, oh (channels-last).
template <class F>
void for_outputs(int64_t N, int64_t C, int64_t OH, int64_t OW, bool channels_last, F&& body) {
  const bool par = N * C * OH * OW >= 16384;
  if (channels_last) {
#pragma omp parallel for schedule(dynamic, 1) if (par)
    for (int64_t r = 0; r < N * OH; ++r) {
      const int64_t n = r / OH, oh = r % OH;
      int64_t o = r * OW * C;
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t c = 0; c < C; ++c, ++o) body(n, c, oh, ow, o);
    }
  } else {
    const int64_t planes = N * C, block = std::max<int64_t>(1, planes / (8 * std::max(1, omp_get_max_threads())));
#pragma omp parallel for schedule(dynamic, block) if (par)
    for (int64_t p = 0; p < planes; ++p) {
      const int64_t n = p / C, c = p % C;
      int64_t o = p * OH * OW;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow, ++o) body(n, c, oh, ow, o);
    }
  }
}

// Forward: the workspace's tap numbers into PyTorch's indices; windows oneDNN saw only as the lowest
// finite value are done again by definition.
template <class WS>
void indices_from_workspace(const Tensor& out, const Tensor& indices, const Tensor& x, const WS* ws,
                            const PoolGeometry& g, bool channels_last) {
  const int64_t N = out.size(0), C = out.size(1), H = g.in_h, W = g.in_w;
  const DType dt = out.dtype();
  std::vector<int64_t> tap(g.kernel_h * g.kernel_w);
  for (int64_t kh = 0; kh < g.kernel_h; ++kh)
    for (int64_t kw = 0; kw < g.kernel_w; ++kw) tap[kh * g.kernel_w + kw] = kh * g.dil_h * W + kw * g.dil_w;
  const auto rh = tap_ranges(g.out_h, H, g.kernel_h, g.stride_h, g.pad_h, g.dil_h);
  const auto rw = tap_ranges(g.out_w, W, g.kernel_w, g.stride_w, g.pad_w, g.dil_w);
  const Strides xs = strides_of(C, H, W, channels_last);
  const float lowest = -max_finite(dt);
  int64_t* idx = indices.data_ptr<int64_t>();
  void* y = out.data_ptr();
  const void* xp = x.data_ptr();
  for_outputs(N, C, g.out_h, g.out_w, channels_last, [&](int64_t n, int64_t c, int64_t oh, int64_t ow, int64_t o) {
    const int64_t h0 = oh * g.stride_h - g.pad_h, w0 = ow * g.stride_w - g.pad_w;
    idx[o] = h0 * W + w0 + tap[ws[o]];
    if (load(y, dt, o) > lowest) return;
    // A window whose maximum is -inf (or the lowest finite value): by definition, from its first
    // in-bounds tap.
    const int64_t plane = n * xs.n + c * xs.c;
    float m = -std::numeric_limits<float>::infinity();
    int64_t bh = h0 + rh[oh].lo * g.dil_h, bw = w0 + rw[ow].lo * g.dil_w;
    for (int64_t kh = rh[oh].lo; kh < rh[oh].hi; ++kh)
      for (int64_t kw = rw[ow].lo; kw < rw[ow].hi; ++kw) {
        const int64_t ih = h0 + kh * g.dil_h, iw = w0 + kw * g.dil_w;
        const float v = load(xp, dt, plane + ih * xs.h + iw * xs.w);
        if (v > m) {
          m = v;
          bh = ih;
          bw = iw;
        }
      }
    idx[o] = bh * W + bw;
    copy_element(y, o, xp, plane + bh * xs.h + bw * xs.w, dt);
  });
}

// Backward: PyTorch's indices into tap numbers; false when one is not an in-bounds tap of its window,
// or when two taps of a window share an offset (a kernel wider than the input), which the table
// cannot tell apart.
template <class WS>
bool workspace_from_indices(WS* ws, const Tensor& indices, int64_t N, int64_t C, const PoolGeometry& g,
                            bool channels_last) {
  const int64_t W = g.in_w, KW = g.kernel_w;
  const int64_t span = (g.kernel_h - 1) * g.dil_h * W + (g.kernel_w - 1) * g.dil_w;
  struct Tap {
    int32_t t = -1, kh = 0, kw = 0;
  };
  std::vector<Tap> inv(span + 1);  // inv[d]: the tap at offset d from the window's start
  for (int64_t kh = 0; kh < g.kernel_h; ++kh)
    for (int64_t kw = 0; kw < KW; ++kw) {
      Tap& e = inv[kh * g.dil_h * W + kw * g.dil_w];
      if (e.t >= 0) return false;
      e = Tap{int32_t(kh * KW + kw), int32_t(kh), int32_t(kw)};
    }
  const auto rh = tap_ranges(g.out_h, g.in_h, g.kernel_h, g.stride_h, g.pad_h, g.dil_h);
  const auto rw = tap_ranges(g.out_w, W, KW, g.stride_w, g.pad_w, g.dil_w);
  const int64_t* idx = indices.data_ptr<int64_t>();
  const Tap none;
  // A bad index is rare: each thread notes one in its own flag, read after the loop.
  std::vector<unsigned char> bad(std::max(1, omp_get_max_threads()), 0);
  for_outputs(N, C, g.out_h, g.out_w, channels_last, [&](int64_t, int64_t, int64_t oh, int64_t ow, int64_t o) {
    const int64_t d = idx[o] - ((oh * g.stride_h - g.pad_h) * W + ow * g.stride_w - g.pad_w);
    const Tap& t = static_cast<uint64_t>(d) <= static_cast<uint64_t>(span) ? inv[d] : none;
    const bool in = t.t >= 0 && t.kh >= rh[oh].lo && t.kh < rh[oh].hi && t.kw >= rw[ow].lo && t.kw < rw[ow].hi;
    ws[o] = static_cast<WS>(in ? t.t : 0);
    if (!in) bad[omp_get_thread_num()] = 1;
  });
  return std::find(bad.begin(), bad.end(), 1) == bad.end();
}

bool is_u8(const memory::desc& d) { return d.data_type() == memory::data_type::u8; }

}  // namespace

bool max_pool2d_forward(const Tensor& out, const Tensor& indices, const Tensor& x, const PoolGeometry& g) {
  const bool cl = runs_channels_last(out, x);
  if (!takes(PoolOp::max_forward, out, cl, g)) return false;
  if (!indices.is_contiguous(cl ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous)) return false;
  auto e = lookup(Kind::max_forward, out.dtype(), cl, false, out.size(0), out.size(1), g);
  if (!e) return false;
  const Tensor xd = dense_in(x, cl);
  if (has_nan(xd)) return false;  // Note [oneDNN max pooling indices]: PyTorch's NaN is the native kernel's
  memory ws = scratch(e->ws, 0);
  execute(*e, {{DNNL_ARG_SRC, wrap(e->src, xd)}, {DNNL_ARG_DST, wrap(e->dst, out)}, {DNNL_ARG_WORKSPACE, ws}});
  if (is_u8(e->ws)) {
    indices_from_workspace(out, indices, xd, static_cast<const uint8_t*>(ws.get_data_handle()), g, cl);
  } else {
    indices_from_workspace(out, indices, xd, static_cast<const int32_t*>(ws.get_data_handle()), g, cl);
  }
  return true;
}

// Whether windows overlap (an input reached by several), in either dimension.
bool windows_overlap(const PoolGeometry& g) {
  return (g.out_h > 1 && g.stride_h < (g.kernel_h - 1) * g.dil_h + 1) ||
         (g.out_w > 1 && g.stride_w < (g.kernel_w - 1) * g.dil_w + 1);
}

// A bfloat16 backward whose windows overlap adds the gradients of several windows into one input:
// oneDNN rounds to bfloat16 in between, the native kernels (and PyTorch) add in float32 and round once.
bool rounds_as_native(const Tensor& out, const PoolGeometry& g) {
  return out.dtype() != kBFloat16 || !windows_overlap(g);
}

bool max_pool2d_backward(const Tensor& out, const Tensor& grad, const Tensor& indices, const PoolGeometry& g) {
  const bool cl = runs_channels_last(out, grad);
  if (!takes(PoolOp::max_backward, out, cl, g) || !rounds_as_native(out, g)) return false;
  auto e = lookup(Kind::max_backward, out.dtype(), cl, false, out.size(0), out.size(1), g);
  if (!e) return false;
  const Tensor id = dense_in(indices, cl);
  memory ws = scratch(e->ws, 0);
  const bool ok =
      is_u8(e->ws)
          ? workspace_from_indices(static_cast<uint8_t*>(ws.get_data_handle()), id, out.size(0), out.size(1), g, cl)
          : workspace_from_indices(static_cast<int32_t*>(ws.get_data_handle()), id, out.size(0), out.size(1), g, cl);
  if (!ok) return false;  // an index off its window's taps: the native scatter (or its error)
  const Tensor gd = dense_in(grad, cl);
  execute(*e, {{DNNL_ARG_DIFF_DST, wrap(e->dst, gd)}, {DNNL_ARG_DIFF_SRC, wrap(e->src, out)}, {DNNL_ARG_WORKSPACE, ws}});
  return true;
}

bool avg_pool2d_forward(const Tensor& out, const Tensor& x, const PoolGeometry& g) {
  const bool cl = runs_channels_last(out, x);
  if (!takes(PoolOp::avg_forward, out, cl, g)) return false;
  auto e = lookup(Kind::avg_forward, out.dtype(), cl, g.count_include_pad, out.size(0), out.size(1), g);
  if (!e) return false;
  const Tensor xd = dense_in(x, cl);
  execute(*e, {{DNNL_ARG_SRC, wrap(e->src, xd)}, {DNNL_ARG_DST, wrap(e->dst, out)}});
  return true;
}

bool avg_pool2d_backward(const Tensor& out, const Tensor& grad, const PoolGeometry& g) {
  const bool cl = runs_channels_last(out, grad);
  if (!takes(PoolOp::avg_backward, out, cl, g) || !rounds_as_native(out, g)) return false;
  auto e = lookup(Kind::avg_backward, out.dtype(), cl, g.count_include_pad, out.size(0), out.size(1), g);
  if (!e) return false;
  const Tensor gd = dense_in(grad, cl);
  execute(*e, {{DNNL_ARG_DIFF_DST, wrap(e->dst, gd)}, {DNNL_ARG_DIFF_SRC, wrap(e->src, out)}});
  return true;
}

namespace {

// adaptive_avg_pool2d as a regular average pooling, when its windows are one.
std::optional<PoolGeometry> regular_windows(const PoolGeometry& a) {
  if (a.out_h <= 0 || a.out_w <= 0 || a.in_h % a.out_h != 0 || a.in_w % a.out_w != 0) return std::nullopt;
  PoolGeometry g = a;
  g.kernel_h = g.stride_h = a.in_h / a.out_h;
  g.kernel_w = g.stride_w = a.in_w / a.out_w;
  g.pad_h = g.pad_w = 0;
  g.dil_h = g.dil_w = 1;
  g.count_include_pad = false;
  return g;
}

}  // namespace

bool adaptive_avg_pool2d_forward(const Tensor& out, const Tensor& x, const PoolGeometry& g) {
  const bool cl = runs_channels_last(out, x);
  if (!takes(PoolOp::adaptive_forward, out, cl, g)) return false;
  const auto r = regular_windows(g);
  if (!r) return false;
  auto e = lookup(Kind::avg_forward, out.dtype(), cl, false, out.size(0), out.size(1), *r);
  if (!e) return false;
  const Tensor xd = dense_in(x, cl);
  execute(*e, {{DNNL_ARG_SRC, wrap(e->src, xd)}, {DNNL_ARG_DST, wrap(e->dst, out)}});
  return true;
}

bool adaptive_avg_pool2d_backward(const Tensor& out, const Tensor& grad, const PoolGeometry& g) {
  const bool cl = runs_channels_last(out, grad);
  if (!takes(PoolOp::adaptive_backward, out, cl, g)) return false;
  const auto r = regular_windows(g);
  if (!r) return false;
  auto e = lookup(Kind::avg_backward, out.dtype(), cl, false, out.size(0), out.size(1), *r);
  if (!e) return false;
  const Tensor gd = dense_in(grad, cl);
  execute(*e, {{DNNL_ARG_DIFF_DST, wrap(e->dst, gd)}, {DNNL_ARG_DIFF_SRC, wrap(e->src, out)}});
  return true;
}

}  // namespace tessera::cpu::onednn
