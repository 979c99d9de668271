// Convolution through oneDNN: conv2d forward, its input gradient (conv_transpose2d's forward) and its
// weight gradient, float32 and bfloat16, for the shapes of Note [oneDNN where it wins] (onednn.h).
//
// Layouts: the primitives are created with their activations in the layout oneDNN prefers
// (format `any`: blocked by 16 channels for the direct JIT kernels) when the result is row-major, and
// in NHWC when it is channels-last (oneDNN's NHWC kernels read and write it in place); the weights
// always `any`. Operands whose layout differs are reordered into per-thread scratch on the way in and
// the result reordered into `out` on the way out (context.h); inputs of any strides are accepted, as
// the reorder reads them strided.
//
// Geometry: a conv2d of tessera's geometry is a oneDNN convolution with dilation - 1 and a right
// padding chosen so that oneDNN's output size formula gives the geometry's output size (the smallest
// such, at least 0: trailing input rows that no window reaches are legal, their input gradient 0).
// bfloat16 convolutions accumulate in float32 inside oneDNN and round once, as the native kernel does.
#include <algorithm>

#include "kernels/cpu/onednn/context.h"
#include "kernels/cpu/onednn/onednn.h"
#include "tensor/tensor_impl.h"

namespace tessera::cpu::onednn {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

enum class Direction { forward = 0, input_backward = 1, weight_backward = 2 };

// Note [oneDNN where it wins]: which convolutions go to oneDNN.
constexpr int64_t kMinChannelsPerGroup = 4;

bool takes(const ConvGeometry& g, DType dt) {
  if (!onednn_enabled() || !to_dnnl(dt)) return false;
  if (g.batch <= 0 || g.in_channels <= 0 || g.out_channels <= 0) return false;
  if (everywhere()) return true;
  // bfloat16 grouped and depthwise convolutions: oneDNN whatever the channels per group (2.95x on a
  // depthwise 3x3 of 64 channels at 56x56, 2.61-4.19; float32 the same class is parity, 0.79-1.48).
  if (dt == kBFloat16 && g.groups > 1) return true;
  // float32 pointwise (1x1, stride 1, unpadded, ungrouped): native. onednn-choice.json at a5b19e1 has
  // oneDNN at 0.767x forward (0.377-1.13) and 0.883x forward and backward (0.761-0.954) on 8x128x28x28;
  // the native kernel runs it as one GEMM per image, with no reorder on the way in or out.
  if (dt == kFloat32 && g.groups == 1 && g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h == 1 && g.stride_w == 1 &&
      g.pad_h == 0 && g.pad_w == 0)
    return false;
  return g.in_channels / g.groups >= kMinChannelsPerGroup;
}

struct Geometry {
  memory::dims src, wei, dst, strides, dilates, pad_l, pad_r;
};

// The oneDNN form of g, or nullopt when no right padding >= 0 reproduces the output size.
std::optional<Geometry> dnnl_geometry(const ConvGeometry& g) {
  auto right = [](int64_t in, int64_t out, int64_t k, int64_t s, int64_t d, int64_t pl) -> std::optional<int64_t> {
    const int64_t ext = (k - 1) * d + 1;
    const int64_t pr = std::max<int64_t>((out - 1) * s + ext - in - pl, 0);
    if ((in + pl + pr - ext) / s + 1 != out || in + pl + pr < ext) return std::nullopt;
    return pr;
  };
  auto pr_h = right(g.in_h, g.out_h, g.kernel_h, g.stride_h, g.dil_h, g.pad_h);
  auto pr_w = right(g.in_w, g.out_w, g.kernel_w, g.stride_w, g.dil_w, g.pad_w);
  if (!pr_h || !pr_w) return std::nullopt;
  Geometry r;
  r.src = {g.batch, g.in_channels, g.in_h, g.in_w};
  r.wei = g.groups == 1 ? memory::dims{g.out_channels, g.in_channels, g.kernel_h, g.kernel_w}
                        : memory::dims{g.groups, g.out_channels / g.groups, g.in_channels / g.groups, g.kernel_h,
                                       g.kernel_w};
  r.dst = {g.batch, g.out_channels, g.out_h, g.out_w};
  r.strides = {g.stride_h, g.stride_w};
  r.dilates = {g.dil_h - 1, g.dil_w - 1};
  r.pad_l = {g.pad_h, g.pad_w};
  r.pad_r = {*pr_h, *pr_w};
  return r;
}

// The primitives of one (direction, dtype, layout, geometry); `ok` false when oneDNN has no kernel for
// it (the call then goes native, and so do later ones with the same key).
struct Entry {
  bool ok = false;
  memory::desc src, wei, dst;  // as the primitive wants them (diff_dst / diff_src / diff_weights likewise)
  memory::desc bias;           // float32, dense (a bfloat16 bias is widened by the reorder)
  dnnl::primitive prim;
};

Key make_key(Direction dir, DType dt, bool channels_last, bool bias, const ConvGeometry& g) {
  Key k;
  k.add(int64_t(dir)).add(int64_t(dt)).add(channels_last).add(bias);
  k.add({g.batch, g.groups, g.in_channels, g.in_h, g.in_w, g.out_channels, g.out_h, g.out_w, g.kernel_h, g.kernel_w,
         g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dil_h, g.dil_w});
  return k;
}

std::shared_ptr<const Entry> make_entry(Direction dir, memory::data_type dt, bool channels_last, bool bias,
                                        const Geometry& G) {
  auto e = std::make_shared<Entry>();
  const tag act = channels_last ? tag::nhwc : tag::any;
  const memory::desc src(G.src, dt, act), wei(G.wei, dt, tag::any), dst(G.dst, dt, act);
  const memory::desc b = bias ? memory::desc({G.dst[1]}, memory::data_type::f32, tag::a) : memory::desc();
  e->bias = b;
  try {
    const auto algo = dnnl::algorithm::convolution_direct;
    dnnl::convolution_forward::desc fd(
        dir == Direction::forward ? dnnl::prop_kind::forward_inference : dnnl::prop_kind::forward_training, algo,
        src, wei, b, dst, G.strides, G.dilates, G.pad_l, G.pad_r);
    dnnl::convolution_forward::primitive_desc fpd(fd, engine());
    if (dir == Direction::forward) {
      e->src = fpd.src_desc();
      e->wei = fpd.weights_desc();
      e->dst = fpd.dst_desc();
      e->prim = dnnl::convolution_forward(fpd);
    } else if (dir == Direction::input_backward) {
      dnnl::convolution_backward_data::desc bd(algo, src, wei, dst, G.strides, G.dilates, G.pad_l, G.pad_r);
      dnnl::convolution_backward_data::primitive_desc bpd(bd, engine(), fpd);
      e->src = bpd.diff_src_desc();
      e->wei = bpd.weights_desc();
      e->dst = bpd.diff_dst_desc();
      e->prim = dnnl::convolution_backward_data(bpd);
    } else {
      dnnl::convolution_backward_weights::desc wd(algo, src, wei, dst, G.strides, G.dilates, G.pad_l, G.pad_r);
      dnnl::convolution_backward_weights::primitive_desc wpd(wd, engine(), fpd);
      e->src = wpd.src_desc();
      e->wei = wpd.diff_weights_desc();
      e->dst = wpd.diff_dst_desc();
      e->prim = dnnl::convolution_backward_weights(wpd);
    }
    e->ok = true;
  } catch (const dnnl::error&) {
    e->ok = false;  // no implementation for this shape: the native kernel runs it
  }
  return e;
}

// The cached primitives for a call, or null when the call goes native.
std::shared_ptr<const Entry> lookup(Direction dir, const Tensor& out, bool bias, const ConvGeometry& g) {
  if (!takes(g, out.dtype())) return nullptr;
  const bool channels_last = !out.is_contiguous() && out.is_contiguous(MemoryFormat::ChannelsLast);
  static PrimitiveCache<Entry> cache[3];  // Note [oneDNN primitive cache]
  const Key key = make_key(dir, out.dtype(), channels_last, bias, g);
  auto e = cache[int(dir)].get(key, [&]() -> std::shared_ptr<const Entry> {
    auto G = dnnl_geometry(g);
    if (!G) return std::make_shared<const Entry>();
    return make_entry(dir, *to_dnnl(out.dtype()), channels_last, bias, *G);
  });
  return e->ok ? e : nullptr;
}

// An activation (N, C, H, W) as oneDNN memory in its own strides.
memory user(const Tensor& t) { return wrap(plain_desc(t), t); }

// A weight (O, I/G, KH, KW) likewise; grouped, as oneDNN's (G, O/G, I/G, KH, KW).
memory user_weight(const Tensor& w, int64_t groups) {
  if (groups == 1) return user(w);
  const Shape& st = w.strides();
  return wrap(plain_desc(w, {groups, w.size(0) / groups, w.size(1), w.size(2), w.size(3)},
                         {w.size(0) / groups * st[0], st[0], st[1], st[2], st[3]}),
              w);
}

struct Input {
  int arg;
  memory user;
  const memory::desc& want;
};

// Runs e.prim on the inputs (reordered as the primitive wants them) with its result written to `out`.
void run(const Entry& e, std::initializer_list<Input> inputs, int out_arg, const memory::desc& out_want,
         memory o) {
  std::unordered_map<int, memory> args;
  int slot = 0;
  for (const Input& in : inputs) args.emplace(in.arg, to_layout(in.user, in.want, slot++));
  const bool direct = o.get_desc() == out_want;
  memory result = direct ? o : scratch(out_want, slot);
  args.emplace(out_arg, result);
  e.prim.execute(stream(), args);
  if (!direct) reorder_into(result, o);
  stream().wait();
  count_call();
}

}  // namespace

bool conv2d_forward(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const ConvGeometry& g) {
  auto e = lookup(Direction::forward, out, bias.defined(), g);
  if (!e) return false;
  if (bias.defined()) {
    run(*e, {{DNNL_ARG_SRC, user(x), e->src}, {DNNL_ARG_WEIGHTS, user_weight(w, g.groups), e->wei},
             {DNNL_ARG_BIAS, user(bias), e->bias}},
        DNNL_ARG_DST, e->dst, user(out));
  } else {
    run(*e, {{DNNL_ARG_SRC, user(x), e->src}, {DNNL_ARG_WEIGHTS, user_weight(w, g.groups), e->wei}}, DNNL_ARG_DST,
        e->dst, user(out));
  }
  return true;
}

bool conv2d_input_backward(const Tensor& out, const Tensor& grad, const Tensor& w, const Tensor& bias,
                           const ConvGeometry& g) {
  // oneDNN's backward-data primitive adds no bias (conv_transpose2d's): that case goes native.
  if (bias.defined()) return false;
  auto e = lookup(Direction::input_backward, out, false, g);
  if (!e) return false;
  run(*e, {{DNNL_ARG_DIFF_DST, user(grad), e->dst}, {DNNL_ARG_WEIGHTS, user_weight(w, g.groups), e->wei}},
      DNNL_ARG_DIFF_SRC, e->src, user(out));
  return true;
}

bool conv2d_weight_backward(const Tensor& out, const Tensor& grad, const Tensor& x, const ConvGeometry& g) {
  // The layout class follows the activations (x), the result being a weight.
  auto e = lookup(Direction::weight_backward, x, false, g);
  if (!e) return false;
  run(*e, {{DNNL_ARG_DIFF_DST, user(grad), e->dst}, {DNNL_ARG_SRC, user(x), e->src}}, DNNL_ARG_DIFF_WEIGHTS, e->wei,
      user_weight(out, g.groups));
  return true;
}

}  // namespace tessera::cpu::onednn
