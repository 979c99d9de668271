// View ops: new layouts over the same storage, no data moved (reshape and flatten copy only when no
// view can express the result, as in PyTorch). Each checks its arguments and names itself in errors.
#include <algorithm>
#include <numeric>

#include "ops/autograd_hook.h"
#include "ops/no_record.h"
#include "ops/op_scope.h"
#include "ops/op_utils.h"
#include "tensor/tensor_impl.h"
#include "tessera/functions.h"

namespace tessera {
namespace {

// Resolves one -1 in `sizes` against numel; raises ShapeError when the sizes cannot hold numel.
Shape infer_size(const char* op, const Shape& sizes, int64_t numel) {
  Shape out = sizes;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      TS_CHECK(infer < 0, ShapeError, op, ": only one dimension can be inferred (-1) in shape ", sizes);
      infer = static_cast<int>(i);
    } else {
      TS_CHECK(out[i] >= 0, ShapeError, op, ": invalid shape dimension ", out[i], " in ", sizes);
      TS_CHECK(!__builtin_mul_overflow(known, out[i], &known), ValueError, op, ": shape ", sizes, " overflows int64");
    }
  }
  if (infer >= 0) {
    TS_CHECK(known != 0, ShapeError, op, ": cannot reshape tensor of ", numel, " elements into shape ", sizes,
             " because the unspecified dimension size -1 can be any value and is ambiguous");
    TS_CHECK(numel % known == 0, ShapeError, op, ": shape ", sizes, " is invalid for input of size ", numel);
    out[infer] = numel / known;
  } else {
    TS_CHECK(known == numel, ShapeError, op, ": shape ", sizes, " is invalid for input of size ", numel);
  }
  return out;
}

// PyTorch's computeStride: strides for viewing (old sizes, old strides) as new sizes, if possible.
std::optional<Shape> view_strides(const Shape& oldshape, const Shape& oldstride, const Shape& newshape) {
  Shape newstride(newshape.size());
  if (oldshape.empty()) {
    std::fill(newstride.begin(), newstride.end(), 1);
    return newstride;
  }
  int64_t numel = numel_of(oldshape);
  if (numel == 0 && oldshape == newshape) return oldstride;
  if (numel == 0) return contiguous_strides(newshape);
  int64_t view_d = static_cast<int64_t>(newshape.size()) - 1;
  int64_t chunk_base_stride = oldstride.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(oldshape.size()) - 1; tensor_d >= 0; tensor_d--) {
    tensor_numel *= oldshape[tensor_d];
    if (tensor_d == 0 || (oldshape[tensor_d - 1] != 1 && oldstride[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || newshape[view_d] == 1)) {
        newstride[view_d] = view_numel * chunk_base_stride;
        view_numel *= newshape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = oldstride[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return newstride;
}

// Records a view op whose derivative needs only the input's shape and the attrs.
// Note [View scopes]: a view opens its OpScope here, once its output exists, so that the profiler and
// the tracer see views like other ops; the checks before it raise without a scope, as meta functions
// do elsewhere.
Tensor recorded(OpId op, const Tensor& self, Tensor out, OpAttrs attrs = {}) {
  OpScope scope(op, {&self});
  if (should_record({&self})) record_op(op, {self}, {out}, std::move(attrs));
  track_views(self, {out});
  return out;
}

// Records a view that picks elements by strides (slice, select, diagonal, as_strided). Its derivative
// scatters the gradient into zeros of the input's shape through the same geometry, expressed relative
// to a contiguous tensor of the input's shape: attrs.ints = [ndim, sizes..., strides..., offset].
// `redo` applies the same view to such a tensor (a meta probe), which yields that geometry whatever
// the input's own strides are. attrs.scalars = the call's own wrapped arguments (slice: dim, start,
// end, step; select: dim, index; diagonal: offset, dim1, dim2), which the compiler replays.
template <class Redo>
Tensor recorded_strided(OpId op, const Tensor& self, Tensor out, std::vector<Scalar> call, Redo&& redo) {
  OpScope scope(op, {&self});  // the probe's view runs nested in it, as implementation
  if (!should_record({&self})) {
    track_views(self, {out});
    return out;
  }
  Tensor probe = make_empty(self.sizes(), self.dtype(), kMeta);
  Tensor g;
  {
    NoRecordScope probe_only;  // the probe's own view records nothing (it would probe again)
    g = redo(probe);
  }
  OpAttrs attrs;
  attrs.ints.push_back(g.dim());
  attrs.ints.insert(attrs.ints.end(), g.sizes().begin(), g.sizes().end());
  attrs.ints.insert(attrs.ints.end(), g.strides().begin(), g.strides().end());
  attrs.ints.push_back(g.storage_offset());
  attrs.scalars = std::move(call);
  record_op(op, {self}, {out}, std::move(attrs));
  track_views(self, {out});
  return out;
}

// Note [Split into pieces]: split, chunk and unbind record one node for all their pieces, as PyTorch's
// split_with_sizes and unbind do. The gradient is then one cat (stack for unbind) of the pieces'
// gradients, where a node per piece (slice / select) would scatter each into zeros of the whole input
// and sum them: for a fused QKV projection split into q, k and v, three zero fills, three full
// copies and two full adds become one copy -- or none, where the pieces' gradients already lie side
// by side in one buffer (split_back, Note [Packed attention gradients]). attrs.ints = [dim, length of
// each piece] (no lengths for unbind).
std::vector<Tensor> recorded_pieces(OpId op, const Tensor& self, std::vector<Tensor> pieces, int64_t d,
                                    const std::vector<int64_t>& lengths) {
  OpScope scope(op, {&self});
  if (should_record({&self})) {
    OpAttrs attrs;
    attrs.ints.push_back(d);
    attrs.ints.insert(attrs.ints.end(), lengths.begin(), lengths.end());
    record_op(op, {self}, pieces, std::move(attrs));
  }
  track_views(self, pieces, /*multi_output=*/true);
  return pieces;
}

}  // namespace

Tensor Tensor::view(const Shape& sizes) const {
  check_defined("view", *this, "self");
  Shape shape = infer_size("view", sizes, numel());
  auto st = view_strides(this->sizes(), strides(), shape);
  TS_CHECK(st.has_value(), ShapeError, "view: size ", shape, " is not compatible with input tensor's size ",
           this->sizes(), " and stride ", strides(),
           " (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
  return recorded(OpId::view, *this, make_view(*this, shape, *st, storage_offset()));
}

Tensor Tensor::view(DType d) const {
  TS_CHECK(tessera::element_size(d) == tessera::element_size(dtype()), DTypeError, "view: cannot view a tensor of ",
           dtype_name(dtype()), " as ", dtype_name(d), " (element sizes ", tessera::element_size(dtype()), " and ",
           tessera::element_size(d), " differ)");
  auto impl = std::make_shared<TensorImpl>(impl_->storage(), d, sizes(), strides(), storage_offset());
  return Tensor(std::move(impl));
}

Tensor Tensor::reshape(const Shape& sizes) const {
  check_defined("reshape", *this, "self");
  Shape shape = infer_size("reshape", sizes, numel());
  if (auto st = view_strides(this->sizes(), strides(), shape)) return recorded(OpId::view, *this, make_view(*this, shape, *st, storage_offset()));
  return contiguous().view(shape);
}

Tensor Tensor::permute(const Shape& dims) const {
  const int64_t n = dim();
  TS_CHECK(static_cast<int64_t>(dims.size()) == n, ShapeError, "permute: number of dims don't match: got ",
           dims.size(), " dims ", dims, " for a tensor of ", n, " dims");
  Shape sz(n), st(n);
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim(dims[i], n, "permute");
    TS_CHECK(!seen[d], ShapeError, "permute: repeated dim ", dims[i], " in ", dims);
    seen[d] = true;
    sz[i] = sizes()[d];
    st[i] = strides()[d];
  }
  return recorded(OpId::permute, *this, make_view(*this, sz, st, storage_offset()), OpAttrs{.ints = dims});
}

Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const {
  const int64_t n = dim();
  if (n == 0) {
    wrap_dim(dim0, n, "transpose");
    wrap_dim(dim1, n, "transpose");
    return recorded(OpId::view, *this, make_view(*this, sizes(), strides(), storage_offset()));
  }
  int64_t a = wrap_dim(dim0, n, "transpose"), b = wrap_dim(dim1, n, "transpose");
  Shape sz = sizes(), st = strides();
  std::swap(sz[a], sz[b]);
  std::swap(st[a], st[b]);
  return recorded(OpId::transpose, *this, make_view(*this, sz, st, storage_offset()), OpAttrs{.ints = {a, b}});
}

Tensor Tensor::t() const {
  TS_CHECK(dim() <= 2, ShapeError, "t: expects a tensor with <= 2 dimensions, but self is ", dim(), "D");
  return dim() < 2 ? transpose(0, 0) : transpose(0, 1);
}

Tensor Tensor::expand(const Shape& sizes) const {
  const int64_t n = dim(), m = static_cast<int64_t>(sizes.size());
  TS_CHECK(m >= n, ShapeError, "expand: the number of sizes provided (", m,
           ") must be greater or equal to the number of dimensions in the tensor (", n, ")");
  Shape sz(m), st(m);
  for (int64_t i = m - 1; i >= 0; --i) {
    int64_t j = i - (m - n);
    int64_t want = sizes[i];
    if (j < 0) {
      TS_CHECK(want >= 0, ShapeError, "expand: the expanded size of the tensor (", want,
               ") isn't allowed in a leading, non-existing dimension ", i);
      sz[i] = want;
      st[i] = 0;
      continue;
    }
    int64_t have = this->sizes()[j];
    if (want == -1) want = have;
    TS_CHECK(have == want || have == 1, ShapeError, "expand: the expanded size of the tensor (", want,
             ") must match the existing size (", have, ") at non-singleton dimension ", i,
             ".  Target sizes: ", sizes, ".  Tensor sizes: ", this->sizes());
    sz[i] = want;
    st[i] = (have == 1 && want != 1) ? 0 : strides()[j];
  }
  return recorded(OpId::expand, *this, make_view(*this, sz, st, storage_offset()));
}

Tensor Tensor::squeeze() const {
  Shape sz, st;
  for (int64_t i = 0; i < dim(); ++i)
    if (sizes()[i] != 1) {
      sz.push_back(sizes()[i]);
      st.push_back(strides()[i]);
    }
  return recorded(OpId::view, *this, make_view(*this, sz, st, storage_offset()));
}

Tensor Tensor::squeeze(int64_t d) const {
  int64_t w = wrap_dim(d, dim(), "squeeze");
  if (dim() == 0 || sizes()[w] != 1) return recorded(OpId::view, *this, make_view(*this, sizes(), strides(), storage_offset()));
  Shape sz = sizes(), st = strides();
  sz.erase(sz.begin() + w);
  st.erase(st.begin() + w);
  return recorded(OpId::view, *this, make_view(*this, sz, st, storage_offset()));
}

Tensor Tensor::unsqueeze(int64_t d) const {
  int64_t w = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape sz = sizes(), st = strides();
  int64_t stride = w < dim() ? sz[w] * st[w] : 1;
  sz.insert(sz.begin() + w, 1);
  st.insert(st.begin() + w, stride);
  return recorded(OpId::view, *this, make_view(*this, sz, st, storage_offset()));
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  TS_CHECK(dim() > 0, ShapeError, "narrow: cannot be applied to a 0-dim tensor");
  int64_t w = wrap_dim(d, dim(), "narrow");
  int64_t size = sizes()[w];
  TS_CHECK(start >= -size && start <= size, IndexError, "narrow: start (", start, ") is out of bounds for dimension ",
           w, " of size ", size);
  if (start < 0) start += size;
  TS_CHECK(length >= 0 && start + length <= size, IndexError, "narrow: start (", start, ") + length (", length,
           ") exceeds dimension size (", size, ")");
  return slice(w, start, start + length, 1);
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) const {
  TS_CHECK(dim() > 0, ShapeError, "slice: cannot be applied to a 0-dim tensor");
  TS_CHECK(step > 0, ValueError, "slice: step must be positive, got ", step);
  int64_t w = wrap_dim(d, dim(), "slice");
  int64_t size = sizes()[w];
  int64_t s = start.value_or(0), e = end.value_or(size);
  if (s < 0) s += size;
  if (e < 0) e += size;
  s = std::clamp<int64_t>(s, 0, size);
  e = std::clamp<int64_t>(e, s, size);
  Shape sz = sizes(), st = strides();
  sz[w] = (e - s + step - 1) / step;
  st[w] = strides()[w] * step;
  return recorded_strided(OpId::slice, *this, make_view(*this, sz, st, storage_offset() + s * strides()[w]),
                          {w, s, e, step}, [&](const Tensor& p) { return p.slice(w, s, e, step); });
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  TS_CHECK(dim() > 0, IndexError, "select: cannot be applied to a 0-dim tensor");
  int64_t w = wrap_dim(d, dim(), "select");
  int64_t size = sizes()[w];
  TS_CHECK(index >= -size && index < size, IndexError, "select: index ", index, " is out of bounds for dimension ",
           w, " with size ", size);
  if (index < 0) index += size;
  Shape sz = sizes(), st = strides();
  sz.erase(sz.begin() + w);
  st.erase(st.begin() + w);
  return recorded_strided(OpId::select, *this, make_view(*this, sz, st, storage_offset() + index * strides()[w]),
                          {w, index}, [&](const Tensor& p) { return p.select(w, index); });
}

Tensor Tensor::as_strided(const Shape& sizes, const Shape& strides, std::optional<int64_t> offset) const {
  TS_CHECK(sizes.size() == strides.size(), ShapeError, "as_strided: mismatch in length of strides (",
           strides.size(), ") and shape (", sizes.size(), ")");
  for (int64_t s : strides)
    TS_CHECK(s >= 0, ValueError, "as_strided: Negative strides are not supported at the moment, got strides: ", strides);
  int64_t off = offset.value_or(storage_offset());
  TS_CHECK(off >= 0, ValueError, "as_strided: invalid storage offset ", off);
  if (grad_recording({this}))
    TS_CHECK(is_contiguous(), NotImplementedError, "as_strided: the gradient through as_strided of a non-contiguous "
             "tensor is not supported; call .contiguous() first");
  return recorded_strided(OpId::as_strided, *this, make_view(*this, sizes, strides, off), {}, [&](const Tensor& p) {
    return p.as_strided(sizes, strides, off - storage_offset());
  });
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  int64_t s = wrap_dim(start_dim, dim(), "flatten"), e = wrap_dim(end_dim, dim(), "flatten");
  TS_CHECK(s <= e, ValueError, "flatten: start_dim (", s, ") cannot come after end_dim (", e, ")");
  if (s == e) return *this;
  Shape sz(sizes().begin(), sizes().begin() + s);
  int64_t n = 1;
  for (int64_t i = s; i <= e; ++i) n *= sizes()[i];
  sz.push_back(n);
  sz.insert(sz.end(), sizes().begin() + e + 1, sizes().end());
  return reshape(sz);
}

Tensor Tensor::unflatten(int64_t d, const Shape& sizes) const {
  TS_CHECK(dim() > 0, ShapeError, "unflatten: cannot be applied to a 0-dim tensor");
  int64_t w = wrap_dim(d, dim(), "unflatten");
  TS_CHECK(!sizes.empty(), ShapeError, "unflatten: sizes must be non-empty");
  Shape inner = infer_size("unflatten", sizes, this->sizes()[w]);
  Shape sz(this->sizes().begin(), this->sizes().begin() + w);
  sz.insert(sz.end(), inner.begin(), inner.end());
  sz.insert(sz.end(), this->sizes().begin() + w + 1, this->sizes().end());
  return view(sz);
}

Tensor Tensor::diagonal(int64_t offset, int64_t dim1, int64_t dim2) const {
  TS_CHECK(dim() >= 2, ShapeError, "diagonal: expects a tensor of at least 2 dims, got ", dim());
  int64_t a = wrap_dim(dim1, dim(), "diagonal"), b = wrap_dim(dim2, dim(), "diagonal");
  TS_CHECK(a != b, ValueError, "diagonal: dimensions cannot be identical ", dim1, ", ", dim2);
  int64_t off = storage_offset();
  int64_t len;
  if (offset >= 0) {
    len = std::max<int64_t>(std::min(sizes()[a], sizes()[b] - offset), 0);
    if (len > 0) off += offset * strides()[b];
  } else {
    len = std::max<int64_t>(std::min(sizes()[a] + offset, sizes()[b]), 0);
    if (len > 0) off -= offset * strides()[a];
  }
  Shape sz, st;
  for (int64_t i = 0; i < dim(); ++i)
    if (i != a && i != b) {
      sz.push_back(sizes()[i]);
      st.push_back(strides()[i]);
    }
  sz.push_back(len);
  st.push_back(strides()[a] + strides()[b]);
  return recorded_strided(OpId::diagonal, *this, make_view(*this, sz, st, off),
                          {offset, a, b}, [&](const Tensor& p) { return p.diagonal(offset, dim1, dim2); });
}

Tensor Tensor::movedim(int64_t source, int64_t destination) const {
  int64_t s = wrap_dim(source, dim(), "movedim"), d = wrap_dim(destination, dim(), "movedim");
  Shape order;
  for (int64_t i = 0; i < dim(); ++i) if (i != s) order.push_back(i);
  order.insert(order.begin() + d, s);
  return dim() == 0 ? *this : permute(order);
}

std::vector<Tensor> Tensor::unbind(int64_t d) const {
  int64_t w = wrap_dim(d, dim(), "unbind");
  TS_CHECK(dim() > 0, ShapeError, "unbind: cannot be applied to a 0-dim tensor");
  std::vector<Tensor> out;
  {
    NoRecordScope guard;  // one node for all the pieces, recorded below
    for (int64_t i = 0; i < sizes()[w]; ++i) out.push_back(select(w, i));
  }
  return recorded_pieces(OpId::unbind, *this, std::move(out), w, {});
}

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t d) const {
  TS_CHECK(dim() > 0, ShapeError, "split: cannot be applied to a 0-dim tensor");
  int64_t w = wrap_dim(d, dim(), "split");
  int64_t size = sizes()[w];
  TS_CHECK(split_size > 0 || (split_size == 0 && size == 0), ValueError, "split: split_size must be positive, got ",
           split_size);
  if (size == 0) return {*this};
  std::vector<int64_t> lengths;
  for (int64_t s = 0; s < size; s += split_size) lengths.push_back(std::min(split_size, size - s));
  return split(lengths, w);
}

std::vector<Tensor> Tensor::split(const std::vector<int64_t>& split_sizes, int64_t d) const {
  TS_CHECK(dim() > 0, ShapeError, "split: cannot be applied to a 0-dim tensor");
  int64_t w = wrap_dim(d, dim(), "split");
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    TS_CHECK(s >= 0, ValueError, "split: split sizes must be non-negative, got ", split_sizes);
    total += s;
  }
  TS_CHECK(total == sizes()[w], ShapeError, "split: split sizes ", split_sizes, " sum to ", total,
           " but the tensor has size ", sizes()[w], " at dimension ", w);
  std::vector<Tensor> out;
  {
    NoRecordScope guard;  // one node for all the pieces, recorded below
    int64_t start = 0;
    for (int64_t s : split_sizes) {
      out.push_back(narrow(w, start, s));
      start += s;
    }
  }
  return recorded_pieces(OpId::split, *this, std::move(out), w, split_sizes);
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t d) const {
  TS_CHECK(chunks > 0, ValueError, "chunk: number of chunks must be positive, got ", chunks);
  TS_CHECK(dim() > 0, ShapeError, "chunk: cannot be applied to a 0-dim tensor");
  int64_t w = wrap_dim(d, dim(), "chunk");
  int64_t size = sizes()[w];
  int64_t split_size = (size + chunks - 1) / chunks;
  if (split_size == 0 && size == 0) {
    std::vector<int64_t> sizes_(chunks, 0);
    return split(sizes_, w);
  }
  return split(std::max<int64_t>(split_size, 1), w);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TS_CHECK(da == db || da == 1 || db == 1, ShapeError, op, ": the size of tensor a (", da,
             ") must match the size of tensor b (", db, ") at non-singleton dimension ", i);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& tensors) {
  Shape shape;
  for (const Tensor& t : tensors) shape = broadcast_shapes(shape, t.sizes(), "broadcast_tensors");
  std::vector<Tensor> out;
  for (const Tensor& t : tensors) out.push_back(t.expand(shape));
  return out;
}

Tensor as_strided_scatter(const Tensor& base, const Tensor& src, const Shape& sizes, const Shape& strides,
                          int64_t offset) {
  OpScope scope(OpId::as_strided_scatter, {&base, &src});
  check_same_device("as_strided_scatter", {&base, &src});
  Tensor out = make_empty(base.sizes(), base.dtype(), base.device());
  {
    // The copies below are this op's implementation, not steps to differentiate.
    NoRecordScope guard;
    out.copy_(base);
    Tensor region = out.as_strided(sizes, strides, offset);
    TS_CHECK(region.sizes() == src.sizes(), ShapeError, "as_strided_scatter: src has shape ", src.sizes(),
             " but the view has shape ", sizes);
    region.copy_(src);
  }
  if (should_record({&base, &src})) {
    OpAttrs attrs;
    attrs.ints.push_back(static_cast<int64_t>(sizes.size()));
    attrs.ints.insert(attrs.ints.end(), sizes.begin(), sizes.end());
    attrs.ints.insert(attrs.ints.end(), strides.begin(), strides.end());
    attrs.ints.push_back(offset);
    record_op(OpId::as_strided_scatter, {base, src}, {out}, std::move(attrs));
  }
  return out;
}

// Free-function spellings.
Tensor reshape(const Tensor& t, const Shape& sizes) { return t.reshape(sizes); }
Tensor permute(const Tensor& t, const Shape& dims) { return t.permute(dims); }
Tensor transpose(const Tensor& t, int64_t d0, int64_t d1) { return t.transpose(d0, d1); }
Tensor flatten(const Tensor& t, int64_t s, int64_t e) { return t.flatten(s, e); }
Tensor squeeze(const Tensor& t) { return t.squeeze(); }
Tensor unsqueeze(const Tensor& t, int64_t d) { return t.unsqueeze(d); }
Tensor narrow(const Tensor& t, int64_t d, int64_t s, int64_t l) { return t.narrow(d, s, l); }
Tensor select(const Tensor& t, int64_t d, int64_t i) { return t.select(d, i); }
Tensor diagonal(const Tensor& t, int64_t o, int64_t a, int64_t b) { return t.diagonal(o, a, b); }
Tensor as_strided(const Tensor& t, const Shape& sz, const Shape& st, std::optional<int64_t> o) { return t.as_strided(sz, st, o); }
std::vector<Tensor> split(const Tensor& x, int64_t s, int64_t d) { return x.split(s, d); }
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& s, int64_t d) { return x.split(s, d); }
std::vector<Tensor> chunk(const Tensor& x, int64_t c, int64_t d) { return x.chunk(c, d); }

}  // namespace tessera
