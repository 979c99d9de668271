// Joining and rearranging ops: cat, stack, repeat, repeat_interleave, flip, roll, pad, tril, triu.
// Meta functions check arguments and allocate the (contiguous) output; the data moves either through
// copy_ into narrow()/expand()ed views of it (cat, stack, repeat, repeat_interleave with one count,
// constant pad) or through the index-map kernel (flip, roll, reflect/replicate/circular pad,
// repeat_interleave with per-element counts). The per-dim maps are index arithmetic on sizes (or, for
// repeat counts, on the counts tensor, which decides the output shape as nonzero's input does).
//
// Autograd (Note [Autograd stage]): each op computes its result with recording off (the copy_()s
// into views of the output are its implementation) and then records itself once, with what its
// derivative needs in attrs: the wrapped dim (cat, stack, repeat_interleave), the per-input sizes
// along it (cat), the repeats, the pads and mode, and for the index-map modes of pad the maps
// themselves as int64 tensors, so that the derivative accumulates through the very same map.
#include <algorithm>
#include <string>

#include "ops/autocast_hook.h"
#include "ops/autograd_hook.h"
#include "ops/no_record.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"
#include "ops/shape_ops_kernel.h"
#include "tensor/tensor_impl.h"
#include "tensor/type_promotion.h"
#include "tessera/functions.h"

namespace tessera {

KernelSlot<IndexMapKernelFn> index_map_kernel("index_map");
KernelSlot<TrilTriuKernelFn> tril_triu_kernel("tril_triu");

namespace {

// PyTorch still skips 1-D tensors of size 0 in cat ("legacy empty" tensors from before zero-size
// dims existed): they take part in type promotion only.
bool is_legacy_empty(const Tensor& t) { return t.dim() == 1 && t.sizes()[0] == 0; }

// An index map as an int64 tensor on `device` (a shape-only one on the meta device, which has no data).
Tensor map_tensor(const std::vector<int64_t>& m, Device device) {
  const Shape sizes = {static_cast<int64_t>(m.size())};
  if (device.is_meta()) return make_empty(sizes, kInt64, device);
  return tensor(m, sizes, TensorOptions(kInt64)).to(device);
}

// Records `op` from `inputs` to `out` when an input requires grad; returns `out`.
Tensor recorded(OpId id, const std::vector<Tensor>& inputs, Tensor out, OpAttrs attrs) {
  if (should_record(inputs)) record_op(id, inputs, {out}, std::move(attrs));
  return out;
}

}  // namespace

// ---- cat / stack -------------------------------------------------------------------------------
namespace {
// attrs->ints (when attrs is given): [d, size of each input along d (-1 for a legacy-empty input)].
Tensor cat_fwd(const std::vector<Tensor>& tensors, int64_t dim, OpAttrs* attrs) {
  NoRecordScope no_record;
  TS_CHECK(!tensors.empty(), ValueError, "cat: expected a non-empty list of Tensors");
  ResultType rt;
  const Tensor* ref = nullptr;  // the first tensor that is not legacy-empty fixes the rank and sizes
  int64_t ref_pos = -1;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TS_CHECK(t.defined(), ValueError, "cat: tensor at position ", i, " is undefined");
    TS_CHECK(t.device() == tensors[0].device(), DeviceError,
             "cat: expected all tensors to be on the same device, but found at least two devices, ",
             tensors[0].device().str(), " (tensor 0) and ", t.device().str(), " (tensor ", i, ")");
    TS_CHECK(t.dim() > 0, ShapeError, "cat: zero-dimensional tensor (at position ", i, ") cannot be concatenated");
    rt.add(t);
    if (!ref && !is_legacy_empty(t)) {
      ref = &t;
      ref_pos = static_cast<int64_t>(i);
    }
  }
  const DType dtype = rt.result();
  const Device device = tensors[0].device();
  if (!ref) {  // only legacy-empty inputs: the result is one of them
    wrap_dim(dim, 1, "cat");
    return make_empty({0}, dtype, device);
  }
  const int64_t d = wrap_dim(dim, ref->dim(), "cat");
  if (attrs) {
    attrs->ints.push_back(d);
    for (const Tensor& t : tensors) attrs->ints.push_back(is_legacy_empty(t) ? -1 : t.sizes()[d]);
  }
  Shape out_sizes = ref->sizes();
  out_sizes[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (is_legacy_empty(t)) continue;
    TS_CHECK(t.dim() == ref->dim(), ShapeError, "cat: Tensors must have same number of dimensions: got ", ref->dim(),
             " and ", t.dim(), " (tensors ", ref_pos, " and ", i, ")");
    for (int64_t k = 0; k < t.dim(); ++k) {
      if (k == d) continue;
      TS_CHECK(t.sizes()[k] == ref->sizes()[k], ShapeError,
               "cat: Sizes of tensors must match except in dimension ", d, ". Expected size ", ref->sizes()[k],
               " but got size ", t.sizes()[k], " for tensor number ", i, " in the list (at dimension ", k, ")");
    }
    out_sizes[d] += t.sizes()[d];
  }
  Tensor out = make_empty(out_sizes, dtype, device);
  int64_t offset = 0;
  for (const Tensor& t : tensors) {
    if (is_legacy_empty(t)) continue;
    const int64_t len = t.sizes()[d];
    if (len > 0 && out.numel() > 0) out.narrow(d, offset, len).copy_(t);
    offset += len;
  }
  return out;
}
}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::cat, tensors); c) return cat(c.tensors(), dim);
  OpScope scope(OpId::cat, tensors);
  if (!should_record(tensors)) return cat_fwd(tensors, dim, nullptr);
  OpAttrs attrs;
  Tensor out = cat_fwd(tensors, dim, &attrs);
  // Only legacy-empty inputs: nothing to differentiate (and no dim was fixed).
  if (attrs.ints.empty()) return out;
  return recorded(OpId::cat, tensors, out, std::move(attrs));
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  if (autocast_pending()) [[unlikely]]
    if (AutocastArgs c(OpId::stack, tensors); c) return stack(c.tensors(), dim);
  OpScope scope(OpId::stack, tensors);
  TS_CHECK(!tensors.empty(), ValueError, "stack: expected a non-empty list of Tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    TS_CHECK(tensors[i].defined(), ValueError, "stack: tensor at position ", i, " is undefined");
    TS_CHECK(tensors[i].sizes() == tensors[0].sizes(), ShapeError,
             "stack: expects each tensor to be equal size, but got ", tensors[0].sizes(), " at entry 0 and ",
             tensors[i].sizes(), " at entry ", i);
  }
  const int64_t d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  Tensor out;
  {
    NoRecordScope no_record;
    std::vector<Tensor> parts;
    parts.reserve(tensors.size());
    for (const Tensor& t : tensors) parts.push_back(t.unsqueeze(d));
    out = cat(parts, d);
  }
  return recorded(OpId::stack, tensors, out, make_attrs({d}));
}

// ---- repeat / repeat_interleave -----------------------------------------------------------------
Tensor repeat(const Tensor& x, const Shape& repeats) {
  OpScope scope(OpId::repeat, {&x});
  check_defined("repeat", x, "self");
  const int64_t n = static_cast<int64_t>(repeats.size());
  TS_CHECK(n >= x.dim(), ShapeError, "repeat: number of dimensions of repeat dims (", n,
           ") can not be smaller than number of dimensions of tensor (", x.dim(), "); got repeats ", repeats,
           " for a tensor of shape ", x.sizes());
  for (int64_t r : repeats)
    TS_CHECK(r >= 0, ShapeError, "repeat: repeats must be non-negative, got ", repeats);
  // x with leading size-1 dims up to n dims, then viewed as (1, s0, 1, s1, ...) and expanded to
  // (r0, s0, r1, s1, ...): copying that into the output viewed the same way tiles it.
  Shape padded(n - x.dim(), 1);
  padded.insert(padded.end(), x.sizes().begin(), x.sizes().end());
  Shape out_sizes(n), inter, inter_expanded;
  for (int64_t i = 0; i < n; ++i) {
    out_sizes[i] = padded[i] * repeats[i];
    inter.insert(inter.end(), {1, padded[i]});
    inter_expanded.insert(inter_expanded.end(), {repeats[i], padded[i]});
  }
  Tensor out = make_empty(out_sizes, x.dtype(), x.device());
  if (out.numel() > 0) {
    NoRecordScope no_record;
    out.view(inter_expanded).copy_(x.reshape(inter).expand(inter_expanded));
  }
  return recorded(OpId::repeat, {x}, out, make_attrs(repeats));
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim) {
  OpScope scope(OpId::repeat_interleave, {&x});
  check_defined("repeat_interleave", x, "self");
  TS_CHECK(repeats >= 0, ValueError, "repeat_interleave: repeats can not be negative, got ", repeats);
  TS_CHECK(!dim || x.dim() > 0, IndexError, "repeat_interleave: dimension specified as ", dim.value_or(0),
           " but tensor has no dimensions");
  Tensor in;
  {
    NoRecordScope no_record;
    in = dim ? x : x.reshape({-1});
  }
  const int64_t d = dim ? wrap_dim(*dim, x.dim(), "repeat_interleave") : 0;
  // Insert a dim of size `repeats` right after d: (..., s_d, r, ...) flattens to (..., s_d * r, ...).
  Shape inter = in.sizes();
  inter.insert(inter.begin() + d + 1, repeats);
  Shape out_sizes = in.sizes();
  out_sizes[d] *= repeats;
  Tensor out = make_empty(out_sizes, x.dtype(), x.device());
  if (out.numel() > 0) {
    NoRecordScope no_record;
    out.view(inter).copy_(in.unsqueeze(d + 1).expand(inter));
  }
  // attrs.ints = [d or -1 (flattened), repeats].
  return recorded(OpId::repeat_interleave, {x}, out, make_attrs({dim ? d : -1, repeats}));
}

Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim) {
  OpScope scope(OpId::repeat_interleave, {&x, &repeats});
  check_defined("repeat_interleave", x, "self");
  check_defined("repeat_interleave", repeats, "repeats");
  check_same_device("repeat_interleave", {&x, &repeats});
  TS_CHECK(repeats.dtype() == kInt64 || repeats.dtype() == kInt32, DTypeError,
           "repeat_interleave: repeats has to be an int64 or int32 tensor, but got ", dtype_name(repeats.dtype()));
  TS_CHECK(repeats.dim() <= 1, ShapeError, "repeat_interleave: repeats must be a 0-dim or 1-dim tensor, but got shape ",
           repeats.sizes());
  TS_CHECK(!dim || x.dim() > 0, IndexError, "repeat_interleave: dimension specified as ", dim.value_or(0),
           " but tensor has no dimensions");
  Tensor in;
  {
    NoRecordScope no_record;
    in = dim ? x : x.reshape({-1});
  }
  const int64_t d = dim ? wrap_dim(*dim, x.dim(), "repeat_interleave") : 0;
  const int64_t n = in.sizes()[d];
  TS_CHECK(repeats.numel() == 1 || repeats.numel() == n, ShapeError,
           "repeat_interleave: repeats must have the same size as input along dim, but got repeats.size(0) = ",
           repeats.numel(), " and input.size(", d, ") = ", n);
  TS_CHECK(!repeats.is_meta(), NotImplementedError,
           "repeat_interleave: with a tensor of repeats the output size depends on its values, which meta tensors "
           "do not have");
  // The counts decide the output's shape, so they come to the host here (a device sync, as in PyTorch).
  std::vector<int64_t> counts = repeats.tolist<int64_t>();
  for (int64_t c : counts)
    TS_CHECK(c >= 0, ValueError, "repeat_interleave: repeats can not be negative, got ", c);
  if (counts.size() == 1) return repeat_interleave(x, counts[0], dim);
  std::vector<std::vector<int64_t>> maps(in.dim());
  for (int64_t i = 0; i < n; ++i) maps[d].insert(maps[d].end(), counts[i], i);
  Shape out_sizes = in.sizes();
  out_sizes[d] = static_cast<int64_t>(maps[d].size());
  Tensor out = make_empty(out_sizes, x.dtype(), x.device());
  if (out.numel() > 0) index_map_kernel(out.device(), out, in, maps);
  if (!should_record({&x})) return out;
  // The derivative sums the gradient back through the map: attrs.ints = [d or -1 (flattened)],
  // attrs.tensors = [the source position along d of every output position].
  return recorded(OpId::repeat_interleave_map, {x}, out, make_attrs({dim ? d : -1}, {map_tensor(maps[d], x.device())}));
}

// ---- flip / roll ---------------------------------------------------------------------------------
Tensor flip(const Tensor& x, const Shape& dims) {
  OpScope scope(OpId::flip, {&x});
  check_defined("flip", x, "self");
  std::vector<std::vector<int64_t>> maps(x.dim());
  std::vector<bool> seen(std::max<int64_t>(x.dim(), 1), false);
  for (int64_t dim : dims) {
    const int64_t d = wrap_dim(dim, x.dim(), "flip");
    TS_CHECK(!seen[d], ShapeError, "flip: dim ", d, " appears multiple times in the list of dims ", dims);
    seen[d] = true;
    if (x.dim() == 0) continue;
    const int64_t s = x.sizes()[d];
    maps[d].resize(s);
    for (int64_t i = 0; i < s; ++i) maps[d][i] = s - 1 - i;
  }
  // Laid out as x (PyTorch's flip allocates with preserve_format; Note [Output layout]); the kernel
  // writes row-major, so another layout is written through a copy.
  Tensor out = make_empty_like_inputs(x.sizes(), x.dtype(), x.device(), {&x});
  if (out.numel() > 0) {
    if (out.is_contiguous()) {
      index_map_kernel(out.device(), out, x, maps);
    } else {
      Tensor dense = make_empty(x.sizes(), x.dtype(), x.device());
      index_map_kernel(dense.device(), dense, x, maps);
      out.copy_(dense);
    }
  }
  return recorded(OpId::flip, {x}, out, make_attrs(dims));
}

Tensor roll(const Tensor& x, const Shape& shifts, const Shape& dims) {
  OpScope scope(OpId::roll, {&x});
  check_defined("roll", x, "self");
  TS_CHECK(!shifts.empty(), ShapeError, "roll: `shifts` required");
  if (dims.empty()) {
    TS_CHECK(shifts.size() == 1, ShapeError, "roll: shifts and dimensions must align. shifts: ", shifts.size(),
             ", dims: 0 (without dims, roll takes exactly one shift over the flattened tensor)");
    return roll(x.reshape({-1}), shifts, {0}).view(x.sizes());
  }
  TS_CHECK(shifts.size() == dims.size(), ShapeError, "roll: shifts and dimensions must align. shifts: ", shifts.size(),
           ", dims: ", dims.size());
  // Repeated dims add up, as rolling twice along one dim does in PyTorch.
  Shape total(std::max<int64_t>(x.dim(), 1), 0);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], x.dim(), "roll");
    const int64_t s = x.dim() ? x.sizes()[d] : 1;
    if (s > 0) total[d] = ((total[d] + shifts[i] % s) % s + s) % s;
  }
  std::vector<std::vector<int64_t>> maps(x.dim());
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (total[d] == 0) continue;
    const int64_t s = x.sizes()[d];
    maps[d].resize(s);
    for (int64_t i = 0; i < s; ++i) maps[d][i] = (i - total[d] + s) % s;
  }
  Tensor out = make_empty(x.sizes(), x.dtype(), x.device());
  if (out.numel() > 0) index_map_kernel(out.device(), out, x, maps);
  // attrs.ints = the net shift of every dim (0 for dims not rolled): rolling back undoes it.
  return recorded(OpId::roll, {x}, out, make_attrs(total));
}

// ---- pad -------------------------------------------------------------------------------------------
namespace {

// Index map of one padded dim for the non-constant modes: output position o reads input position
// o - left, brought back into [0, size) by reflecting (without repeating the edge), clamping or
// wrapping around.
std::vector<int64_t> pad_map(const std::string& mode, int64_t size, int64_t left, int64_t out_size) {
  std::vector<int64_t> m(out_size);
  for (int64_t o = 0; o < out_size; ++o) {
    int64_t p = o - left;
    if (mode == "reflect") {
      if (p < 0) p = -p;
      if (p >= size) p = 2 * (size - 1) - p;
    } else if (mode == "replicate") {
      p = std::clamp<int64_t>(p, 0, size - 1);
    } else {  // circular
      p = ((p % size) + size) % size;
    }
    m[o] = p;
  }
  return m;
}

}  // namespace

Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, const std::string& mode, double value) {
  OpScope scope(OpId::pad, {&x});
  check_defined("pad", x, "input");
  TS_CHECK(mode == "constant" || mode == "reflect" || mode == "replicate" || mode == "circular", ValueError,
           "pad: unrecognised padding mode '", mode, "' (expected 'constant', 'reflect', 'replicate' or 'circular')");
  TS_CHECK(pad.size() % 2 == 0, ValueError, "pad: padding length must be divisible by 2, got ", pad.size(),
           " values ", pad);
  const int64_t k = static_cast<int64_t>(pad.size()) / 2;  // number of padded dims, the last ones
  TS_CHECK(k <= x.dim(), ValueError, "pad: padding length should be less than or equal to two times the input "
           "dimension but got padding length ", pad.size(), " and input of dimension ", x.dim());
  Shape out_sizes = x.sizes();
  auto left = [&](int64_t d) { return pad[2 * (x.dim() - 1 - d)]; };
  auto right = [&](int64_t d) { return pad[2 * (x.dim() - 1 - d) + 1]; };
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) {
    out_sizes[d] = x.sizes()[d] + left(d) + right(d);
    TS_CHECK(out_sizes[d] >= 0, ShapeError, "pad: the input size ", x.sizes()[d], ", plus negative padding ",
             left(d), " and ", right(d), " resulted in a negative output size, which is invalid. Check dimension ",
             d, " of your input of shape ", x.sizes());
  }

  if (mode == "constant") {
    Tensor out = make_empty(out_sizes, x.dtype(), x.device());
    if (out.numel() > 0) {
      NoRecordScope no_record;
      out.fill_(value);
      // The part of x that survives cropping lands at max(left, 0) in every padded dim.
      Tensor src = x, dst = out;
      bool empty = false;
      for (int64_t d = x.dim() - k; d < x.dim() && !empty; ++d) {
        const int64_t crop_l = std::max<int64_t>(-left(d), 0), crop_r = std::max<int64_t>(-right(d), 0);
        const int64_t len = x.sizes()[d] - crop_l - crop_r;
        empty = len <= 0;
        if (empty) break;
        src = src.narrow(d, crop_l, len);
        dst = dst.narrow(d, std::max<int64_t>(left(d), 0), len);
      }
      if (!empty) dst.copy_(src);
    }
    // Its derivative is the constant pad of the gradient by the negated pads (a crop where x was
    // padded, zeros where it was cropped): attrs.ints = pad.
    return recorded(OpId::constant_pad, {x}, out, make_attrs(pad));
  }

  // reflect / replicate / circular: PyTorch's {reflection,replication}_pad{1,2,3}d and circular pad
  // take 1-3 padded dims over an input with one or two leading (batch, channel) dims.
  TS_CHECK(k >= 1 && k <= 3 && (x.dim() == k + 1 || x.dim() == k + 2), NotImplementedError, "pad: mode '", mode,
           "' pads the last 1, 2 or 3 dims of a 2-D to 5-D input (padding of length 2k needs a (k+1)-D or (k+2)-D "
           "input), but got padding ", pad, " for input of shape ", x.sizes());
  std::vector<std::vector<int64_t>> maps(x.dim());
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) {
    const int64_t s = x.sizes()[d];
    TS_CHECK(s > 0, ShapeError, "pad: mode '", mode, "' needs a non-empty input in every padded dimension, but ",
             "dimension ", d, " of input of shape ", x.sizes(), " is empty");
    if (mode == "reflect") {
      TS_CHECK(left(d) < s && right(d) < s, ValueError, "pad: padding size should be less than the corresponding "
               "input dimension, but got padding (", left(d), ", ", right(d), ") at dimension ", d, " of input ",
               x.sizes());
    } else if (mode == "circular") {
      TS_CHECK(left(d) <= s && right(d) <= s && -left(d) <= s && -right(d) <= s, ValueError,
               "pad: padding value causes wrapping around more than once: padding (", left(d), ", ", right(d),
               ") at dimension ", d, " of input ", x.sizes());
    }
    TS_CHECK(out_sizes[d] >= 1, ShapeError, "pad: input of shape ", x.sizes(), " is too small: padding (", left(d),
             ", ", right(d), ") gives output size ", out_sizes[d], " at dimension ", d);
    maps[d] = pad_map(mode, s, left(d), out_sizes[d]);
  }
  Tensor out = make_empty(out_sizes, x.dtype(), x.device());
  if (out.numel() > 0) index_map_kernel(out.device(), out, x, maps);
  if (!should_record({&x})) return out;
  // The derivative accumulates the gradient through the same maps: attrs.ints = the padded dims,
  // attrs.tensors = their maps (int64, one source position per output position).
  OpAttrs attrs;
  for (int64_t d = x.dim() - k; d < x.dim(); ++d) {
    attrs.ints.push_back(d);
    attrs.tensors.push_back(map_tensor(maps[d], x.device()));
  }
  return recorded(OpId::pad_map, {x}, out, std::move(attrs));
}

// ---- tril / triu ---------------------------------------------------------------------------------
namespace {
Tensor tril_triu(OpId id, const Tensor& x, int64_t diagonal, bool upper) {
  const char* op = op_name(id);
  OpScope scope(id, {&x});
  check_defined(op, x, "self");
  TS_CHECK(x.dim() >= 2, ShapeError, op, ": input tensor must have at least 2 dimensions, but got shape ", x.sizes());
  Tensor out = make_empty(x.sizes(), x.dtype(), x.device());
  if (out.numel() > 0) tril_triu_kernel(out.device(), out, x, diagonal, upper);
  return recorded(id, {x}, out, make_attrs({diagonal}));
}
}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return tril_triu(OpId::tril, x, diagonal, false); }
Tensor triu(const Tensor& x, int64_t diagonal) { return tril_triu(OpId::triu, x, diagonal, true); }

}  // namespace tessera
