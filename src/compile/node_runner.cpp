// The replay entries (node_runner.h): for each op the capture supports, the layout of its trace
// record and the public call that recomputes it. The layouts are the ones the ops record (Note
// [Autograd stage] and each derivative file's header; Note [Trace records] for the ops that give the
// capture a record of their own). Keep an entry next to its family's neighbours.
#include "compile/node_runner.h"

#include <array>
#include <optional>

#include "ops/attention_ops.h"
#include "ops/batch_norm_ops.h"
#include "ops/conv_ops.h"
#include "ops/trace_hook.h"
#include "ops/fused_ops.h"
#include "ops/loss_ops.h"
#include "ops/norm_ops.h"
#include "tessera/functions.h"

namespace tessera::compiler {
namespace {

using Ts = std::vector<Tensor>;
using Metas = std::vector<TensorMeta>;
constexpr AttrTensor I = AttrTensor::Input, O = AttrTensor::Output, X = AttrTensor::Ignored;

std::optional<Tensor> opt(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }
// A reduction's dtype argument: the captured output's dtype where the op's default would differ.
std::optional<DType> dtype_arg(const Tensor& x, const TensorMeta& out, bool integral_to_int64) {
  DType d = x.dtype();
  if (integral_to_int64 && is_integral(d, /*include_bool=*/true)) d = kInt64;
  return out.dtype == d ? std::nullopt : std::optional<DType>(out.dtype);
}
std::optional<Dims> dims_or_all(const ReduceAttrs& r) {
  return r.dims.empty() ? std::nullopt : std::optional<Dims>(Dims(r.dims));
}
IntPair pair(const HW& v) { return IntPair{v.h, v.w}; }
// A backward op's output mask, from the first N ints of its record.
template <size_t N>
std::array<bool, N> mask(const OpAttrs& a) {
  std::array<bool, N> m{};
  for (size_t i = 0; i < N; ++i) m[i] = a.ints.at(i) != 0;
  return m;
}
template <class Tuple, size_t... I>
Ts tuple_to_vec(Tuple&& t, std::index_sequence<I...>) {
  return Ts{std::get<I>(t)...};
}
template <class... T>
Ts vec(std::tuple<T...> t) {
  return tuple_to_vec(t, std::index_sequence_for<T...>{});
}

Tensor unary(OpId op, const Tensor& x, const OpAttrs& a) {
  switch (op) {
#define TS_U(name) \
  case OpId::name: \
    return name(x);
    TS_U(neg) TS_U(abs) TS_U(exp) TS_U(exp2) TS_U(log) TS_U(log2) TS_U(log1p) TS_U(expm1) TS_U(sqrt)
    TS_U(rsqrt) TS_U(sin) TS_U(cos) TS_U(tan) TS_U(tanh) TS_U(sigmoid) TS_U(relu) TS_U(silu) TS_U(erf)
    TS_U(floor) TS_U(ceil) TS_U(round) TS_U(trunc) TS_U(sign) TS_U(reciprocal) TS_U(logical_not)
    TS_U(bitwise_not) TS_U(isnan) TS_U(isinf) TS_U(isfinite) TS_U(hardswish)
#undef TS_U
    case OpId::gelu:
      return gelu(x, a.str.empty() ? "none" : a.str);
    case OpId::softplus:
      return softplus(x, a.scalars.at(0).to_double(), a.scalars.at(1).to_double());
    default:
      TS_THROW(NotImplementedError, "compile: no unary replay for ", op_name(op));
  }
}

Tensor binary(OpId op, const Tensor& a, const Tensor& b, const OpAttrs& at) {
  switch (op) {
    case OpId::add:
      return add(a, b, at.scalars.empty() ? Scalar(1) : at.scalars[0]);
    case OpId::sub:
      return sub(a, b, at.scalars.empty() ? Scalar(1) : at.scalars[0]);
    case OpId::div:
      return div(a, b, at.str);
    case OpId::threshold_backward:
      return threshold_backward(a, b, at.scalars.at(0));
#define TS_B(name) \
  case OpId::name: \
    return name(a, b);
    TS_B(mul) TS_B(pow) TS_B(maximum) TS_B(minimum) TS_B(fmod) TS_B(remainder) TS_B(atan2) TS_B(logaddexp)
    TS_B(eq) TS_B(ne) TS_B(lt) TS_B(le) TS_B(gt) TS_B(ge) TS_B(logical_and) TS_B(logical_or) TS_B(logical_xor)
    TS_B(bitwise_and) TS_B(bitwise_or) TS_B(bitwise_xor) TS_B(bitwise_left_shift) TS_B(bitwise_right_shift)
#undef TS_B
    default:
      TS_THROW(NotImplementedError, "compile: no binary replay for ", op_name(op));
  }
}

Ts run_unary(OpId op, const Ts& in, const OpAttrs& a, const Metas&) { return {unary(op, in[0], a)}; }
Ts run_binary(OpId op, const Ts& in, const OpAttrs& a, const Metas&) { return {binary(op, in[0], in[1], a)}; }

Ts run_view(OpId op, const Ts& in, const OpAttrs& a, const Metas& out) {
  const Tensor& x = in[0];
  switch (op) {
    case OpId::view:
      return {x.view(out[0].sizes)};
    case OpId::permute:
      return {x.permute(a.ints)};
    case OpId::transpose:
      return {x.transpose(a.ints.at(0), a.ints.at(1))};
    case OpId::expand:
      return {x.expand(out[0].sizes)};
    case OpId::slice:
      return {x.slice(a.scalars.at(0).to_int(), a.scalars.at(1).to_int(), a.scalars.at(2).to_int(),
                      a.scalars.at(3).to_int())};
    case OpId::select:
      return {x.select(a.scalars.at(0).to_int(), a.scalars.at(1).to_int())};
    case OpId::diagonal:
      return {x.diagonal(a.scalars.at(0).to_int(), a.scalars.at(1).to_int(), a.scalars.at(2).to_int())};
    case OpId::as_strided:
      return {x.as_strided(out[0].sizes, out[0].strides, out[0].offset)};
    case OpId::split:
      return x.split(std::vector<int64_t>(a.ints.begin() + 1, a.ints.end()), a.ints.at(0));
    case OpId::unbind:
      return x.unbind(a.ints.at(0));
    default:
      TS_THROW(NotImplementedError, "compile: no view replay for ", op_name(op));
  }
}

Ts run_reduce(OpId op, const Ts& in, const OpAttrs& a, const Metas& out) {
  const Tensor& x = in[0];
  const ReduceAttrs& r = a.as<ReduceAttrs>();
  switch (op) {
    case OpId::sum:
      return {sum(x, r.dims, r.keepdim, dtype_arg(x, out[0], true))};
    case OpId::prod:
      return {prod(x, r.dims, r.keepdim, dtype_arg(x, out[0], true))};
    case OpId::mean:
      return {mean(x, r.dims, r.keepdim, dtype_arg(x, out[0], false))};
    case OpId::amax:
      return {amax(x, r.dims, r.keepdim)};
    case OpId::amin:
      return {amin(x, r.dims, r.keepdim)};
    case OpId::max:
      return {r.dims.empty() ? max(x) : amax(x, r.dims, r.keepdim)};
    case OpId::min:
      return {r.dims.empty() ? min(x) : amin(x, r.dims, r.keepdim)};
    case OpId::max_dim:
      return vec(max(x, r.dims.at(0), r.keepdim));
    case OpId::min_dim:
      return vec(min(x, r.dims.at(0), r.keepdim));
    case OpId::argmax:
      return {argmax(x, r.dims.empty() ? std::nullopt : std::optional<int64_t>(r.dims[0]), r.keepdim)};
    case OpId::argmin:
      return {argmin(x, r.dims.empty() ? std::nullopt : std::optional<int64_t>(r.dims[0]), r.keepdim)};
    case OpId::any:
      return {any(x, r.dims, r.keepdim)};
    case OpId::all:
      return {all(x, r.dims, r.keepdim)};
    case OpId::var:
      return {var(x, dims_or_all(r), r.correction, r.keepdim)};
    case OpId::std:
      return {tessera::std(x, dims_or_all(r), r.correction, r.keepdim)};
    case OpId::norm:
      return {norm(x, r.p, dims_or_all(r), r.keepdim)};
    case OpId::logsumexp:
      return {logsumexp(x, r.dims, r.keepdim)};
    case OpId::cumsum:
      return {cumsum(x, r.dims.at(0), dtype_arg(x, out[0], true))};
    case OpId::cumprod:
      return {cumprod(x, r.dims.at(0), dtype_arg(x, out[0], true))};
    default:
      TS_THROW(NotImplementedError, "compile: no reduction replay for ", op_name(op));
  }
}

Ts run_linalg(OpId op, const Ts& in, const OpAttrs& a, const Metas&) {
  switch (op) {
    case OpId::mm:
      return {mm(in[0], in[1])};
    case OpId::bmm:
      return {bmm(in[0], in[1])};
    case OpId::dot:
      return {dot(in[0], in[1])};
    case OpId::outer:
      return {outer(in[0], in[1])};
    case OpId::addmm:
      return {addmm(in[0], in[1], in[2], a.scalars.at(0), a.scalars.at(1))};
    case OpId::baddbmm:
      return {baddbmm(in[0], in[1], in[2], a.scalars.at(0), a.scalars.at(1))};
    case OpId::linear:
      return {linear(in[0], in[1], opt(in[2]))};
    default:
      TS_THROW(NotImplementedError, "compile: no matrix-product replay for ", op_name(op));
  }
}

Ts run_other(OpId op, const Ts& in, const OpAttrs& a, const Metas& out) {
  switch (op) {
    // ---- pointwise with three operands
    case OpId::where:  // record {a, b}, attrs.tensors {condition}
      return {where(in[2], in[0], in[1])};
    case OpId::clamp:
      return {clamp(in[0], opt(in[1]), opt(in[2]))};
    case OpId::lerp:
      return {lerp(in[0], in[1], in[2])};
    case OpId::addcmul:
      return {addcmul(in[0], in[1], in[2], a.scalars.at(0))};
    case OpId::addcdiv:
      return {addcdiv(in[0], in[1], in[2], a.scalars.at(0))};
    case OpId::softmax:
      return {softmax(in[0], a.ints.at(0), out[0].dtype == in[0].dtype() ? std::nullopt : std::optional<DType>(out[0].dtype))};
    case OpId::log_softmax:
      return {log_softmax(in[0], a.ints.at(0),
                          out[0].dtype == in[0].dtype() ? std::nullopt : std::optional<DType>(out[0].dtype))};
    // ---- joins and rearrangements
    case OpId::as_strided_scatter: {  // ints = [ndim, sizes..., strides..., offset]
      const int64_t nd = a.ints.at(0);
      const Shape sizes(a.ints.begin() + 1, a.ints.begin() + 1 + nd);
      const Shape strides(a.ints.begin() + 1 + nd, a.ints.begin() + 1 + 2 * nd);
      return {as_strided_scatter(in[0], in[1], sizes, strides, a.ints.at(1 + 2 * nd))};
    }
    case OpId::cat:
      return {cat(in, a.ints.at(0))};
    case OpId::stack:
      return {stack(in, a.ints.at(0))};
    case OpId::repeat:
      return {repeat(in[0], a.ints)};
    case OpId::flip:
      return {flip(in[0], a.ints)};
    // ---- indexing (index tensors are node inputs after the record's own)
    case OpId::index_select:
      return {index_select(in[0], a.as<IndexAttrs>().dim, in[1])};
    case OpId::gather:
      return {gather(in[0], a.as<IndexAttrs>().dim, in[1])};
    case OpId::scatter_add:
      return {scatter_add(in[0], a.as<IndexAttrs>().dim, in[2], in[1])};
    case OpId::index_add:
      return {index_add(in[0], a.as<IndexAttrs>().dim, in[2], in[1], a.as<IndexAttrs>().alpha)};
    case OpId::embedding: {
      const int64_t pad = a.as<IndexAttrs>().padding_idx;
      return {embedding(in[0], in[1], pad < 0 ? std::nullopt : std::optional<int64_t>(pad))};
    }
    case OpId::masked_fill:
      return {masked_fill(in[0], in[1], a.scalars.at(0))};
    case OpId::index: {
      std::vector<std::optional<Tensor>> idx;
      for (size_t i = 1; i < in.size(); ++i) idx.push_back(opt(in[i]));
      return {index(in[0], idx)};
    }
    case OpId::index_put: {
      std::vector<std::optional<Tensor>> idx;
      for (size_t i = 2; i < in.size(); ++i) idx.push_back(opt(in[i]));
      return {index_put(in[0], idx, in[1], a.as<IndexAttrs>().accumulate)};
    }
    // ---- convolution and pooling (4-D inputs, as recorded)
    case OpId::conv2d: {
      const ConvAttrs& c = a.as<ConvAttrs>();
      return {conv2d(in[0], in[1], opt(in[2]), pair(c.stride), pair(c.padding), pair(c.dilation), c.groups)};
    }
    case OpId::conv_transpose2d: {
      const ConvAttrs& c = a.as<ConvAttrs>();
      return {conv_transpose2d(in[0], in[1], opt(in[2]), pair(c.stride), pair(c.padding), pair(c.output_padding),
                               c.groups, pair(c.dilation))};
    }
    case OpId::max_pool2d_with_indices: {
      const PoolAttrs& p = a.as<PoolAttrs>();
      return vec(max_pool2d_with_indices(in[0], pair(p.kernel), pair(p.stride), pair(p.padding), pair(p.dilation),
                                         p.ceil_mode));
    }
    case OpId::avg_pool2d: {
      const PoolAttrs& p = a.as<PoolAttrs>();
      return {avg_pool2d(in[0], pair(p.kernel), pair(p.stride), pair(p.padding), p.ceil_mode, p.count_include_pad)};
    }
    case OpId::adaptive_avg_pool2d:
      return {adaptive_avg_pool2d(in[0], IntPair{out[0].sizes.at(2), out[0].sizes.at(3)})};
    // ---- normalization, attention, loss
    case OpId::native_layer_norm: {
      const NormAttrs& n = a.as<NormAttrs>();
      return vec(native_layer_norm(in[0], n.normalized_shape, in[1], in[2], n.eps));
    }
    case OpId::native_rms_norm: {
      const NormAttrs& n = a.as<NormAttrs>();
      return vec(native_rms_norm(in[0], n.normalized_shape, in[1], n.eps));
    }
    case OpId::native_add_layer_norm: {  // outputs {sum, y, mean, rstd}
      const NormAttrs& n = a.as<NormAttrs>();
      const std::optional<DType> y_dtype = out[1].dtype == in[0].dtype() ? std::nullopt : std::optional<DType>(out[1].dtype);
      return vec(native_add_layer_norm(in[0], in[1], n.normalized_shape, in[2], in[3], n.eps, y_dtype));
    }
    case OpId::native_batch_norm: {  // the call as made: {x, weight, bias, running_mean, running_var}
      const BatchNormAttrs& b = a.as<BatchNormAttrs>();
      return vec(native_batch_norm(in[0], in[1], in[2], in[3], in[4], b.training, a.scalars.at(0).to_double(), b.eps));
    }
    // ---- the backward ops a joint graph replays (Note [Joint graph]); masked outputs only
    case OpId::cross_entropy_backward: {  // {grad, logits, target, weight, lse}
      Tensor dx = cross_entropy_loss_rows_backward(in[0], in[1], in[2], in[3], in[4], a.ints.at(0),
                                                   a.scalars.at(0).to_double(), a.ints.at(1));
      return {in[1].dim() >= 3 ? dx.movedim(1, -1) : dx};  // the record holds the class-last dx
    }
    case OpId::native_layer_norm_backward: {
      auto [dx, dw, db] = native_layer_norm_backward(in[0], in[1], a.as<NormAttrs>().normalized_shape, in[2], in[3],
                                                     in[4], in[5], mask<3>(a));
      return defined_only({dx, dw, db});
    }
    case OpId::add_layer_norm_backward: {
      const int64_t low = a.ints.at(4);
      auto [dx, dlow, dw, db] = native_add_layer_norm_backward(
          in[0], in[1], in[2], a.as<NormAttrs>().normalized_shape, in[3], in[4], in[5], in[6], mask<4>(a),
          low < 0 ? std::nullopt : std::optional<DType>(static_cast<DType>(low)));
      return defined_only({dx, dlow, dw, db});
    }
    case OpId::native_rms_norm_backward: {
      auto [dx, dw] = native_rms_norm_backward(in[0], in[1], a.as<NormAttrs>().normalized_shape, in[2], in[3], mask<2>(a));
      return defined_only({dx, dw});
    }
    case OpId::native_batch_norm_backward: {
      const BatchNormAttrs& b = a.as<BatchNormAttrs>();
      auto [dx, dw, db] = native_batch_norm_backward(in[0], in[1], in[2], in[3], in[4], in[5], in[6], b.training, b.eps,
                                                     mask<3>(a), in[7]);
      return defined_only({dx, dw, db});
    }
    case OpId::flash_attention_backward:
      return vec(flash_attention_backward(in[0], in[1], in[2], in[3], in[4], in[5], a.ints.at(0) != 0,
                                          a.scalars.at(0).to_double()));
    case OpId::max_pool2d_backward: {  // record {grad}, attrs.tensors {indices}
      const PoolAttrs& p = a.as<PoolAttrs>();
      return {max_pool2d_backward(in[0], in[1], out[0].sizes, pair(p.kernel), pair(p.stride), pair(p.padding),
                                  pair(p.dilation), p.ceil_mode)};
    }
    case OpId::avg_pool2d_backward: {
      const PoolAttrs& p = a.as<PoolAttrs>();
      return {avg_pool2d_backward(in[0], out[0].sizes, pair(p.kernel), pair(p.stride), pair(p.padding), p.ceil_mode,
                                  p.count_include_pad)};
    }
    case OpId::adaptive_avg_pool2d_backward:
      return {adaptive_avg_pool2d_backward(in[0], out[0].sizes)};
    case OpId::conv2d_backward_weight: {  // record {grad, x}
      const ConvAttrs& c = a.as<ConvAttrs>();
      return {conv2d_backward_weight(in[0], in[1], pair(c.kernel), pair(c.stride), pair(c.padding), pair(c.dilation),
                                     c.groups)};
    }
    case OpId::gelu_tanh_backward:
      return {gelu_tanh_backward(in[0], in[1])};
    case OpId::linear_weight_bias_grad: {
      auto [dw, db] = linear_weight_bias_grad(in[0], in[1], mask<2>(a));
      return defined_only({dw, db});
    }
    case OpId::linear_dgelu_bgrad: {
      auto [dpre, db] = linear_dgelu_bgrad(in[0], in[1], in[2], a.flag);
      return defined_only({dpre, db});
    }
    case OpId::linear_gelu:  // outputs {y, pre}: the saved pre-activation is a value of the graph
      if (out.size() == 1) return {linear_gelu(in[0], in[1], opt(in[2]))};  // Note [Unread saved outputs]
      return vec(linear_gelu_saving(in[0], in[1], opt(in[2])));
    case OpId::mlp_gelu:  // outputs {y, pre, h}, or {y}
      if (out.size() == 1) return {mlp_gelu(in[0], in[1], opt(in[2]), in[3], opt(in[4]))};
      return vec(mlp_gelu_saving(in[0], in[1], opt(in[2]), in[3], opt(in[4])));
    case OpId::linear_cross_entropy: {  // the call as made: {x, weight, target} -> loss, and dx, dW where computed
      auto [loss, dx, dw] = linear_cross_entropy_saving(in[0], in[1], in[2], a.ints.at(0), a.str, a.ints.at(1),
                                                        a.ints.at(2) != 0, a.ints.at(3) != 0);
      return defined_only({loss, dx, dw});
    }
    case OpId::flash_attention_forward:
      return vec(flash_attention_forward(in[0], in[1], in[2], a.ints.at(0) != 0, a.scalars.at(0).to_double()));
    case OpId::cross_entropy_loss_rows: {  // the call as made: {logits, target, weight}
      auto [loss, lse] = cross_entropy_loss_rows(in[0], in[1], in[2], a.ints.at(0), a.scalars.at(0).to_double(),
                                                 a.ints.at(1));
      return {loss, lse};
    }
    // ---- factories (dtype and device from the captured output)
    case OpId::arange:
      return {arange(a.scalars.at(0), a.scalars.at(1), a.scalars.at(2), TensorOptions(out[0].dtype, out[0].device))};
    case OpId::linspace:
      return {linspace(a.scalars.at(0).to_double(), a.scalars.at(1).to_double(), a.ints.at(0),
                       TensorOptions(out[0].dtype, out[0].device))};
    default:
      TS_THROW(NotImplementedError, "compile: no replay for ", op_name(op));
  }
}

// In-place nodes: input 0 is the tensor written, then the record's own inputs.
Ts run_in_place(OpId op, const Ts& in, const OpAttrs& a, const Metas& out) {
  // An absent input 0 is a fresh buffer that this op overwrites whole (Note [Capture provenance]).
  // The inputs each form reads: {written, src} for copy_, {written, self, other} for the binary ones.
  const size_t want = op == OpId::copy_ ? 2 : (op == OpId::add_ || op == OpId::sub_ || op == OpId::mul_) ? 3 : 1;
  TS_CHECK(!in.empty() && in.size() >= want && !out.empty(), ValueError, "compile: the ", op_name(op), " node has ", in.size(),
           " inputs and ", out.size(), " outputs; it takes the tensor it writes and its record's ", want - 1,
           " inputs, and returns one");
  Tensor self = in[0].defined() ? in[0]
                                : empty_strided(out[0].sizes, out[0].strides, TensorOptions(out[0].dtype, out[0].device));
  switch (op) {
    case OpId::copy_:  // record {src}
      self.copy_(in[1], a.flag);
      break;
    case OpId::fill_:
      self.fill_(a.scalars.at(0));
      break;
    case OpId::relu_:  // record {self}
      self.relu_();
      break;
    case OpId::add_:  // record {self, other}
      self.add_(in[2], a.scalars.empty() ? Scalar(1) : a.scalars[0]);
      break;
    case OpId::sub_:
      self.sub_(in[2], a.scalars.empty() ? Scalar(1) : a.scalars[0]);
      break;
    case OpId::mul_:
      self.mul_(in[2]);
      break;
    case OpId::uniform_:
      self.uniform_(a.scalars.at(0).to_double(), a.scalars.at(1).to_double());
      break;
    case OpId::normal_:
      self.normal_(a.scalars.at(0).to_double(), a.scalars.at(1).to_double());
      break;
    case OpId::bernoulli_:
      self.bernoulli_(a.scalars.at(0).to_double());
      break;
    case OpId::random_:
      self.random_(a.scalars.at(0).to_int(), a.scalars.at(1).to_int());
      break;
    default:
      TS_THROW(NotImplementedError, "compile: no in-place replay for ", op_name(op));
  }
  return {self};
}

std::array<OpReplay, kNumOps> build_table() {
  std::array<OpReplay, kNumOps> t{};
  auto set = [&](OpId op, OpReplay r) { t[static_cast<size_t>(op)] = std::move(r); };
  for (OpId op : {OpId::neg, OpId::abs, OpId::exp, OpId::exp2, OpId::log, OpId::log2, OpId::log1p, OpId::expm1,
                  OpId::sqrt, OpId::rsqrt, OpId::sin, OpId::cos, OpId::tan, OpId::tanh, OpId::sigmoid, OpId::relu,
                  OpId::silu, OpId::erf, OpId::floor, OpId::ceil, OpId::round, OpId::trunc, OpId::sign,
                  OpId::reciprocal, OpId::logical_not, OpId::bitwise_not, OpId::isnan, OpId::isinf, OpId::isfinite,
                  OpId::hardswish, OpId::gelu, OpId::softplus})
    set(op, {{}, false, run_unary});
  for (OpId op : {OpId::add, OpId::sub, OpId::mul, OpId::div, OpId::pow, OpId::maximum, OpId::minimum, OpId::fmod,
                  OpId::remainder, OpId::atan2, OpId::logaddexp, OpId::threshold_backward, OpId::eq, OpId::ne,
                  OpId::lt, OpId::le, OpId::gt, OpId::ge, OpId::logical_and, OpId::logical_or, OpId::logical_xor,
                  OpId::bitwise_and, OpId::bitwise_or, OpId::bitwise_xor, OpId::bitwise_left_shift,
                  OpId::bitwise_right_shift})
    set(op, {{}, false, run_binary});
  for (OpId op : {OpId::view, OpId::permute, OpId::transpose, OpId::expand, OpId::slice, OpId::select,
                  OpId::diagonal, OpId::as_strided, OpId::split, OpId::unbind})
    set(op, {{}, false, run_view});
  for (OpId op : {OpId::sum, OpId::prod, OpId::mean, OpId::amax, OpId::amin, OpId::max, OpId::min, OpId::argmax,
                  OpId::argmin, OpId::any, OpId::all, OpId::var, OpId::std, OpId::norm, OpId::logsumexp,
                  OpId::cumsum, OpId::cumprod})
    set(op, {{}, false, run_reduce});
  set(OpId::max_dim, {{O}, false, run_reduce});
  set(OpId::min_dim, {{O}, false, run_reduce});
  for (OpId op : {OpId::mm, OpId::bmm, OpId::dot, OpId::outer, OpId::addmm, OpId::baddbmm, OpId::linear})
    set(op, {{}, false, run_linalg});
  for (OpId op : {OpId::as_strided_scatter, OpId::clamp, OpId::lerp, OpId::addcmul, OpId::addcdiv, OpId::softmax, OpId::log_softmax, OpId::cat,
                  OpId::stack, OpId::repeat, OpId::flip, OpId::conv2d, OpId::conv_transpose2d, OpId::avg_pool2d,
                  OpId::adaptive_avg_pool2d, OpId::native_batch_norm, OpId::cross_entropy_loss_rows, OpId::arange,
                  OpId::linspace})
    set(op, {{}, false, run_other});
  set(OpId::where, {{I}, false, run_other});
  for (OpId op : {OpId::index_select, OpId::gather, OpId::scatter_add, OpId::index_add, OpId::embedding,
                  OpId::masked_fill})
    set(op, {{I}, false, run_other});
  set(OpId::index, {{}, true, run_other});
  set(OpId::index_put, {{}, true, run_other});
  set(OpId::max_pool2d_with_indices, {{O}, false, run_other});
  set(OpId::native_layer_norm, {{O, O}, false, run_other});
  set(OpId::native_rms_norm, {{O}, false, run_other});
  set(OpId::native_add_layer_norm, {{O, O, X, X}, false, run_other});
  set(OpId::flash_attention_forward, {{O}, false, run_other});
  for (OpId op : {OpId::cross_entropy_backward, OpId::native_layer_norm_backward, OpId::add_layer_norm_backward,
                  OpId::native_rms_norm_backward, OpId::native_batch_norm_backward, OpId::flash_attention_backward,
                  OpId::avg_pool2d_backward, OpId::adaptive_avg_pool2d_backward, OpId::conv2d_backward_weight,
                  OpId::linear_weight_bias_grad, OpId::linear_dgelu_bgrad, OpId::gelu_tanh_backward})
    set(op, {{}, false, run_other});
  set(OpId::max_pool2d_backward, {{I}, false, run_other});
  set(OpId::linear_gelu, {{O}, false, run_other});
  set(OpId::mlp_gelu, {{O, O}, false, run_other});
  set(OpId::linear_cross_entropy, {{}, false, run_other});
  for (OpId op : {OpId::copy_, OpId::fill_, OpId::relu_, OpId::add_, OpId::sub_, OpId::mul_, OpId::uniform_,
                  OpId::normal_, OpId::bernoulli_, OpId::random_})
    set(op, {{}, false, run_in_place});
  return t;
}

}  // namespace

const OpReplay* op_replay(OpId op) {
  static const std::array<OpReplay, kNumOps> table = build_table();
  const OpReplay& r = table[static_cast<size_t>(op)];
  return r.run ? &r : nullptr;
}

Tensor meta_tensor(const TensorMeta& m) {
  const int64_t span = m.span_bytes() / static_cast<int64_t>(element_size(m.dtype));
  return empty({m.offset + span}, TensorOptions(m.dtype, kMeta)).as_strided(m.sizes, m.strides, m.offset);
}

std::vector<Tensor> run_node(const Graph& g, const Node& n, const std::vector<Tensor>& inputs) {
  const OpReplay* r = op_replay(n.op);
  TS_CHECK(r != nullptr, NotImplementedError, "compile: the graph holds ", op_name(n.op),
           ", which the executor cannot run");
  Metas out;
  out.reserve(n.outputs.size());
  for (int v : n.outputs) out.push_back(g.values[v].meta);
  std::vector<Tensor> res = r->run(n.op, inputs, n.attrs, out);
  TS_CHECK(res.size() == n.outputs.size(), ValueError, "compile: ", op_name(n.op), " returned ", res.size(),
           " outputs, the graph expects ", n.outputs.size());
  return res;
}

}  // namespace tessera::compiler
