// Batch normalization through oneDNN: the training forward (batch statistics), the inference forward
// (running statistics) and the backward (training and eval), float32 and bfloat16 inputs with float32
// parameters, contiguous and channels-last, for the classes of Note [oneDNN where it wins] (onednn.h).
// The semantics are those of ops/batch_norm_kernel.h; the native kernels (kernels/cpu/batch_norm.cpp)
// stay the fallback and the reference in tests.
//
// x, seen as (N, C, L), is given to oneDNN as the 4-D (N, C, L, 1) in nchw or nhwc, which are its two
// layouts element for element (with L = 1 they are one layout: nhwc). The flags follow the parameters:
// use_scale when a weight is given, use_shift when a bias is; use_global_stats in inference and in the
// eval backward.
//
// Layouts: channels-last runs in place, in nhwc (oneDNN's JIT kernel where C is a multiple of 16, its
// C++ one otherwise). NCHW runs on the blocked nChw16c: x (and dy) reordered into per-thread scratch,
// the result reordered back. oneDNN's own NCHW kernel (ncsp_bnorm, C++) measured 1.4x (32x64x56x56)
// to 17x (8x256x14x14, training forward) slower than the JIT kernel behind the reorders, both timed
// standalone on the AMD EPYC of Note [oneDNN where it wins] while other work shared it (fastest of 15):
// training forward 11.5 against 8.2 ms and 4.0 against 0.23 ms, backward 16.0 against 11.8 ms.
//
// What oneDNN computes and what this file does around it:
//  - training forward: oneDNN writes y, the batch mean (into save_mean) and the biased variance (float32,
//    two passes, as the native kernel's); this file derives save_invstd = 1 / sqrt(var + eps) and
//    updates the running statistics with PyTorch's rule, in float64 as the native kernel:
//    running_mean = (1 - momentum) * running_mean + momentum * mean, running_var likewise with the
//    unbiased variance var * M / (M - 1). oneDNN accumulates its statistics in float32 (the native
//    kernel in float64): on 10^5-element channels the two differ in the 7th digit.
//  - backward: oneDNN takes the mean and the variance, not the invstd that tessera saves, so the
//    variance is recovered as 1 / invstd^2 - eps (oneDNN then forms 1 / sqrt(var + eps) again, within an
//    ulp or two of invstd); the weight gradient is oneDNN's diff_scale = sum(dy * xhat), the bias
//    gradient its diff_shift = sum(dy). Both are always computed (into scratch when not wanted, with a
//    weight of ones when there is none; oneDNN also wants a shift, which nothing reads), and so is the
//    input gradient: a result then does not depend on which others were asked for.
//  - empty inputs never reach a kernel (the op handles them); training with M = N * L <= 1, whose
//    statistics are NaN by PyTorch's rule, goes native.
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/onednn/context.h"
#include "kernels/cpu/onednn/onednn.h"
#include "tensor/tensor_impl.h"

namespace tessera::cpu::onednn {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using flags_t = dnnl::normalization_flags;

enum class Kind { training = 0, inference, backward_training, backward_eval };

// Note [oneDNN where it wins]: float32 channels-last inputs below this many elements keep the native
// inference and backward (its blocks of 16 channels run at parity with oneDNN or faster there).
constexpr int64_t kSmallChannelsLast = int64_t(1) << 22;

// Which batch norms go to oneDNN (Note [oneDNN where it wins]): every training forward; the inference
// and the training backward except float32 channels-last below kSmallChannelsLast elements. The eval
// backward (eval-mode statistics, a gradient through them) was not measured: native.
bool rule(Kind kind, const BatchNormShape& s, DType dt) {
  const bool small_f32_cl = dt == kFloat32 && s.channels_last && s.l > 1 && s.n * s.c * s.l < kSmallChannelsLast;
  switch (kind) {
    case Kind::training: return true;
    case Kind::inference:
    case Kind::backward_training: return !small_f32_cl;
    case Kind::backward_eval: return false;
  }
  return false;
}

bool takes(Kind kind, const BatchNormShape& s, DType dt) {
  if (!onednn_enabled() || !to_dnnl(dt) || s.n * s.l == 0 || s.c == 0) return false;
  if (kind == Kind::training && s.n * s.l <= 1) return false;
  return everywhere() || rule(kind, s, dt);
}

struct Entry {
  bool ok = false;
  memory::desc user;  // x, y, dy, dx as tessera holds them: (N, C, L, 1) in nchw or nhwc
  memory::desc data;  // the same as the primitive takes them: `user`, or nChw16c for nchw
  memory::desc stat;  // mean, variance, scale, shift and their gradients: (C) float32
  dnnl::primitive prim;
};

int64_t float_bits(double v) {
  const float f = static_cast<float>(v);
  int32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

std::shared_ptr<const Entry> lookup(Kind kind, DType dt, const BatchNormShape& s, bool scale, bool shift, double eps) {
  static PrimitiveCache<Entry> cache[4];  // Note [oneDNN primitive cache]
  Key key;
  key.add(int64_t(kind)).add(int64_t(dt)).add({s.n, s.c, s.l}).add(s.channels_last).add(scale).add(shift);
  key.add(float_bits(eps));
  auto e = cache[int(kind)].get(key, [&] {
    auto entry = std::make_shared<Entry>();
    const bool nhwc = s.channels_last || s.l == 1;
    const memory::dims dims{s.n, s.c, s.l, 1};
    entry->user = memory::desc(dims, *to_dnnl(dt), nhwc ? tag::nhwc : tag::nchw);
    entry->data = nhwc ? entry->user : memory::desc(dims, *to_dnnl(dt), tag::nChw16c);
    entry->stat = memory::desc({s.c}, memory::data_type::f32, tag::a);
    flags_t f = flags_t::none;
    if (scale) f |= flags_t::use_scale;
    if (shift) f |= flags_t::use_shift;
    if (kind == Kind::inference || kind == Kind::backward_eval) f |= flags_t::use_global_stats;
    try {
      const auto prop = kind == Kind::inference ? dnnl::prop_kind::forward_inference : dnnl::prop_kind::forward_training;
      dnnl::batch_normalization_forward::desc fd(prop, entry->data, float(eps), f);
      dnnl::batch_normalization_forward::primitive_desc fpd(fd, engine());
      if (fpd.src_desc() != entry->data || fpd.dst_desc() != entry->data) return std::shared_ptr<const Entry>(entry);
      if (kind == Kind::training || kind == Kind::inference) {
        entry->prim = dnnl::batch_normalization_forward(fpd);
      } else {
        dnnl::batch_normalization_backward::desc bd(dnnl::prop_kind::backward, entry->data, entry->data, float(eps), f);
        dnnl::batch_normalization_backward::primitive_desc bpd(bd, engine(), fpd);
        if (bpd.diff_src_desc() != entry->data || bpd.diff_dst_desc() != entry->data)
          return std::shared_ptr<const Entry>(entry);
        entry->prim = dnnl::batch_normalization_backward(bpd);
      }
      entry->ok = true;
    } catch (const dnnl::error&) {
      entry->ok = false;  // no implementation: the native kernel runs it
    }
    return std::shared_ptr<const Entry>(entry);
  });
  return e->ok ? e : nullptr;
}

// Per-channel float32 buffers of the calling thread, kept across calls (slot: which one).
float* channel_buffer(int64_t c, int slot) {
  thread_local std::vector<float> buf[5];
  if (int64_t(buf[slot].size()) < c) buf[slot].resize(c);
  return buf[slot].data();
}

memory stat_memory(const Entry& e, const void* p) { return memory(e.stat, engine(), const_cast<void*>(p)); }

void execute(const Entry& e, const std::unordered_map<int, memory>& args) {
  e.prim.execute(stream(), args);
  stream().wait();
  count_call();
}

// An operand in the primitive's layout (scratch slot `slot` when it is reordered).
memory input(const Entry& e, const Tensor& t, int slot) { return to_layout(wrap(e.user, t), e.data, slot); }

// The memory a result is computed in, and its copy into the tensor afterwards (when they differ).
// An undefined tensor is a result not wanted: computed into scratch and dropped.
struct Output {
  memory user, data;
  Output(const Entry& e, const Tensor& t, int slot)
      : user(t.defined() ? wrap(e.user, t) : scratch(e.data, slot)),
        data(!t.defined() || e.user == e.data ? user : scratch(e.data, slot)) {}
  void finish() {
    if (data.get_data_handle() != user.get_data_handle()) {
      reorder_into(data, user);
      stream().wait();
    }
  }
};

}  // namespace

bool batch_norm_forward_training(const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd, const Tensor& x,
                                 const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                                 const Tensor& running_var, const BatchNormShape& s, double momentum, double eps) {
  if (!takes(Kind::training, s, x.dtype())) return false;
  auto e = lookup(Kind::training, x.dtype(), s, weight.defined(), bias.defined(), eps);
  if (!e) return false;
  float* mean = save_mean.data_ptr<float>();
  float* var = channel_buffer(s.c, 0);
  Output out(*e, y, 1);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, input(*e, x, 0)},
                                       {DNNL_ARG_DST, out.data},
                                       {DNNL_ARG_MEAN, stat_memory(*e, mean)},
                                       {DNNL_ARG_VARIANCE, stat_memory(*e, var)}};
  if (weight.defined()) args.emplace(DNNL_ARG_SCALE, stat_memory(*e, weight.data_ptr()));
  if (bias.defined()) args.emplace(DNNL_ARG_SHIFT, stat_memory(*e, bias.data_ptr()));
  execute(*e, args);
  out.finish();
  float* invstd = save_invstd.data_ptr<float>();
  const double m = static_cast<double>(s.n * s.l);
  float* rm = running_mean.defined() ? running_mean.data_ptr<float>() : nullptr;
  float* rv = running_var.defined() ? running_var.data_ptr<float>() : nullptr;
  for (int64_t c = 0; c < s.c; ++c) {
    invstd[c] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(var[c]) + eps));
    if (rm) {
      rm[c] = static_cast<float>((1.0 - momentum) * static_cast<double>(rm[c]) + momentum * static_cast<double>(mean[c]));
      rv[c] = static_cast<float>((1.0 - momentum) * static_cast<double>(rv[c]) +
                                 momentum * static_cast<double>(var[c]) * m / (m - 1));
    }
  }
  return true;
}

bool batch_norm_forward_inference(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias,
                                  const Tensor& running_mean, const Tensor& running_var, const BatchNormShape& s,
                                  double eps) {
  if (!takes(Kind::inference, s, x.dtype())) return false;
  auto e = lookup(Kind::inference, x.dtype(), s, weight.defined(), bias.defined(), eps);
  if (!e) return false;
  Output out(*e, y, 1);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, input(*e, x, 0)},
                                       {DNNL_ARG_DST, out.data},
                                       {DNNL_ARG_MEAN, stat_memory(*e, running_mean.data_ptr())},
                                       {DNNL_ARG_VARIANCE, stat_memory(*e, running_var.data_ptr())}};
  if (weight.defined()) args.emplace(DNNL_ARG_SCALE, stat_memory(*e, weight.data_ptr()));
  if (bias.defined()) args.emplace(DNNL_ARG_SHIFT, stat_memory(*e, bias.data_ptr()));
  execute(*e, args);
  out.finish();
  return true;
}

bool batch_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                         const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& invstd,
                         const BatchNormShape& s, bool training, double eps) {
  const Kind kind = training ? Kind::backward_training : Kind::backward_eval;
  if (!takes(kind, s, x.dtype())) return false;
  auto e = lookup(kind, x.dtype(), s, true, true, eps);
  if (!e) return false;
  // The variance oneDNN wants, from the invstd that tessera keeps.
  float* var = channel_buffer(s.c, 0);
  const float* is = invstd.data_ptr<float>();
  for (int64_t c = 0; c < s.c; ++c) var[c] = static_cast<float>(1.0 / (double(is[c]) * double(is[c])) - eps);
  float* ones = nullptr;
  if (!weight.defined()) {
    ones = channel_buffer(s.c, 1);
    std::fill(ones, ones + s.c, 1.0f);
  }
  void* dw = dweight.defined() ? dweight.data_ptr() : channel_buffer(s.c, 2);
  void* db = dbias.defined() ? dbias.data_ptr() : channel_buffer(s.c, 3);
  // use_shift's backward takes a shift argument although no result depends on it.
  float* shift = channel_buffer(s.c, 4);
  std::fill(shift, shift + s.c, 0.0f);
  Output out(*e, dx, 2);
  execute(*e, {{DNNL_ARG_SRC, input(*e, x, 0)},
               {DNNL_ARG_DIFF_DST, input(*e, dy, 1)},
               {DNNL_ARG_DIFF_SRC, out.data},
               {DNNL_ARG_MEAN, stat_memory(*e, mean.data_ptr())},
               {DNNL_ARG_VARIANCE, stat_memory(*e, var)},
               {DNNL_ARG_SCALE, stat_memory(*e, weight.defined() ? weight.data_ptr() : ones)},
               {DNNL_ARG_SHIFT, stat_memory(*e, shift)},
               {DNNL_ARG_DIFF_SCALE, stat_memory(*e, dw)},
               {DNNL_ARG_DIFF_SHIFT, stat_memory(*e, db)}});
  out.finish();
  return true;
}

}  // namespace tessera::cpu::onednn
