// Tensor: a handle to a TensorImpl (storage + sizes, strides, offset, dtype, device). Copying a Tensor
// copies the handle, as in PyTorch; views share storage. Methods mirror PyTorch's; each forwards to the
// free function of the same name in functions.h (the op layer), so both spellings behave the same.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tessera/device.h"
#include "tessera/dtype.h"
#include "tessera/error.h"
#include "tessera/scalar.h"
#include "tessera/shape.h"

namespace tessera {

class TensorImpl;
class Generator;
namespace cuda {
class Stream;
}
class Node;
class Tensor;
using TensorList = std::vector<Tensor>;

// The order in which a dense tensor's elements lie in memory (PyTorch's torch.memory_format).
// Contiguous: row-major. ChannelsLast: a 4-D (N, C, H, W) tensor stored as (N, H, W, C), i.e. with
// strides (H*W*C, 1, W*C, C); convolutions and pooling keep it (Note [Channels-last outputs]).
enum class MemoryFormat { Contiguous, ChannelsLast };

// How a factory lays out its result. Implicit from a dtype, a device or a device string, so that
// `zeros({2, 3}, kInt64)`, `zeros({2, 3}, "meta")` and `zeros({2, 3}, {kFloat16, "cuda"})` all read well.
struct TensorOptions {
  std::optional<DType> dtype;
  Device device = kCPU;
  TensorOptions() = default;
  TensorOptions(DType d) : dtype(d) {}                         // NOLINT
  TensorOptions(Device dev) : device(dev) {}                   // NOLINT
  TensorOptions(const char* dev) : device(dev) {}              // NOLINT
  TensorOptions(DType d, Device dev) : dtype(d), device(dev) {}
  DType dtype_or(DType fallback) const { return dtype.value_or(fallback); }
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // ---- metadata -----------------------------------------------------------------------------
  const Shape& sizes() const;
  const Shape& shape() const { return sizes(); }
  const Shape& strides() const;
  int64_t size(int64_t dim) const;
  int64_t stride(int64_t dim) const;
  int64_t dim() const;
  int64_t numel() const;
  int64_t storage_offset() const;
  DType dtype() const;
  DType scalar_type() const { return dtype(); }
  Device device() const;
  size_t element_size() const;
  size_t nbytes() const;
  bool is_contiguous() const;
  // Dense in `format`'s order; ChannelsLast holds only for 4-D tensors. Size-1 dims may have any
  // stride, so a tensor can be both (e.g. (N, C, 1, 1)).
  bool is_contiguous(MemoryFormat format) const;
  bool is_floating_point() const { return tessera::is_floating_point(dtype()); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_meta() const { return device().is_meta(); }
  // Pointer to the first element (storage base + offset). Raises for meta tensors.
  void* data_ptr() const;
  template <class T> T* data_ptr() const {
    TS_CHECK(dtype_of_v<T> == dtype(), DTypeError, "data_ptr: expected a tensor of dtype ",
             dtype_name(dtype_of_v<T>), " but it is ", dtype_name(dtype()));
    return static_cast<T*>(data_ptr());
  }
  bool is_alias_of(const Tensor& other) const;  // shares storage
  uint64_t version() const;                      // bumped by every in-place op on the storage

  // ---- conversion and copies ------------------------------------------------------------------
  Scalar item() const;
  template <class T> T item() const { return item().to<T>(); }
  Tensor to(DType dtype, bool copy = false) const;
  Tensor to(Device device, bool non_blocking = false, bool copy = false) const;
  Tensor to(Device device, DType dtype, bool non_blocking = false, bool copy = false) const;
  Tensor to(const char* device, bool non_blocking = false) const { return to(Device(device), non_blocking); }
  Tensor cpu() const { return to(kCPU); }
  Tensor cuda(int index = 0, bool non_blocking = false) const { return to(Device::cuda(index), non_blocking); }
  Tensor contiguous() const;
  // This tensor when it already is_contiguous(format), else a copy laid out so (ChannelsLast: 4-D only).
  Tensor contiguous(MemoryFormat format) const;
  Tensor clone() const;
  // non_blocking: a copy between the host's page-locked memory and a GPU may return before it has
  // finished (synchronize the stream before using the host memory); otherwise copies are synchronous
  // as far as the host can tell.
  Tensor& copy_(const Tensor& src, bool non_blocking = false);
  Tensor& fill_(const Scalar& value);
  Tensor& zero_();
  template <class T> std::vector<T> tolist() const;  // flattened row-major values, converted to T
  // A copy of a CPU tensor in page-locked (pinned) host memory, which asynchronous copies to and from a
  // GPU need; the tensor itself if it is pinned already. DeviceError without CUDA or a GPU.
  Tensor pin_memory() const;
  bool is_pinned() const;  // CPU tensor in page-locked memory (false in a build without CUDA)
  // Marks this CUDA tensor's memory as used by `stream` (not the stream it was allocated on): when the
  // tensor is freed, the memory is reused only after the work queued on `stream` so far has finished.
  void record_stream(const cuda::Stream& stream) const;

  // ---- views (share storage) -------------------------------------------------------------------
  Tensor view(const Shape& sizes) const;
  Tensor view(DType dtype) const;  // reinterpret the bytes (same element size only)
  Tensor reshape(const Shape& sizes) const;
  Tensor view_as(const Tensor& other) const { return view(other.sizes()); }
  Tensor reshape_as(const Tensor& other) const { return reshape(other.sizes()); }
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor t() const;
  Tensor mT() const { return transpose(-2, -1); }
  Tensor expand(const Shape& sizes) const;
  Tensor expand_as(const Tensor& other) const { return expand(other.sizes()); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start = std::nullopt,
               std::optional<int64_t> end = std::nullopt, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor as_strided(const Shape& sizes, const Shape& strides, std::optional<int64_t> storage_offset = std::nullopt) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, const Shape& sizes) const;
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;
  Tensor movedim(int64_t source, int64_t destination) const;
  std::vector<Tensor> unbind(int64_t dim = 0) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> split(const std::vector<int64_t>& split_sizes, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;

  // ---- unary (out-of-place and in-place) ------------------------------------------------------
#define TS_UNARY_METHOD(name) \
  Tensor name() const;        \
  Tensor& name##_();
  TS_UNARY_METHOD(neg) TS_UNARY_METHOD(abs) TS_UNARY_METHOD(exp) TS_UNARY_METHOD(exp2)
  TS_UNARY_METHOD(log) TS_UNARY_METHOD(log2) TS_UNARY_METHOD(log1p) TS_UNARY_METHOD(expm1)
  TS_UNARY_METHOD(sqrt) TS_UNARY_METHOD(rsqrt) TS_UNARY_METHOD(sin) TS_UNARY_METHOD(cos)
  TS_UNARY_METHOD(tan) TS_UNARY_METHOD(tanh) TS_UNARY_METHOD(sigmoid) TS_UNARY_METHOD(relu)
  TS_UNARY_METHOD(silu) TS_UNARY_METHOD(erf) TS_UNARY_METHOD(floor) TS_UNARY_METHOD(ceil)
  TS_UNARY_METHOD(round) TS_UNARY_METHOD(trunc) TS_UNARY_METHOD(sign) TS_UNARY_METHOD(reciprocal)
  TS_UNARY_METHOD(logical_not) TS_UNARY_METHOD(bitwise_not)
#undef TS_UNARY_METHOD
  Tensor gelu(const std::string& approximate = "none") const;
  Tensor softplus(double beta = 1.0, double threshold = 20.0) const;
  Tensor isnan() const;
  Tensor isinf() const;
  Tensor isfinite() const;
  Tensor nan_to_num(std::optional<double> nan = std::nullopt, std::optional<double> posinf = std::nullopt,
                    std::optional<double> neginf = std::nullopt) const;

  // ---- binary -----------------------------------------------------------------------------------
  Tensor add(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor add(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor& add_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& add_(const Scalar& other, const Scalar& alpha = 1);
  Tensor sub(const Tensor& other, const Scalar& alpha = 1) const;
  Tensor sub(const Scalar& other, const Scalar& alpha = 1) const;
  Tensor& sub_(const Tensor& other, const Scalar& alpha = 1);
  Tensor& sub_(const Scalar& other, const Scalar& alpha = 1);
  // rounding_mode: "" (true division), "trunc" or "floor".
  Tensor div(const Tensor& other, const std::string& rounding_mode = "") const;
  Tensor div(const Scalar& other, const std::string& rounding_mode = "") const;
  Tensor& div_(const Tensor& other, const std::string& rounding_mode = "");
  Tensor& div_(const Scalar& other, const std::string& rounding_mode = "");
#define TS_BINARY_METHOD(name)                 \
  Tensor name(const Tensor& other) const;      \
  Tensor name(const Scalar& other) const;      \
  Tensor& name##_(const Tensor& other);        \
  Tensor& name##_(const Scalar& other);
  TS_BINARY_METHOD(mul) TS_BINARY_METHOD(pow) TS_BINARY_METHOD(maximum) TS_BINARY_METHOD(minimum)
  TS_BINARY_METHOD(fmod) TS_BINARY_METHOD(remainder) TS_BINARY_METHOD(atan2)
  TS_BINARY_METHOD(eq) TS_BINARY_METHOD(ne) TS_BINARY_METHOD(lt) TS_BINARY_METHOD(le)
  TS_BINARY_METHOD(gt) TS_BINARY_METHOD(ge)
  TS_BINARY_METHOD(logical_and) TS_BINARY_METHOD(logical_or) TS_BINARY_METHOD(logical_xor)
  TS_BINARY_METHOD(bitwise_and) TS_BINARY_METHOD(bitwise_or) TS_BINARY_METHOD(bitwise_xor)
  TS_BINARY_METHOD(bitwise_left_shift) TS_BINARY_METHOD(bitwise_right_shift)
#undef TS_BINARY_METHOD
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor clamp(const Tensor& min, const Tensor& max) const;
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
  Tensor lerp(const Tensor& end, const Scalar& weight) const;
  Tensor lerp(const Tensor& end, const Tensor& weight) const;
  Tensor addcmul(const Tensor& t1, const Tensor& t2, const Scalar& value = 1) const;
  Tensor addcdiv(const Tensor& t1, const Tensor& t2, const Scalar& value = 1) const;
  Tensor& addcmul_(const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
  Tensor& addcdiv_(const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
  Tensor where(const Tensor& condition, const Tensor& other) const;  // condition ? self : other

  // ---- reductions -------------------------------------------------------------------------------
  Tensor sum(std::optional<DType> dtype = std::nullopt) const;
  Tensor sum(Dims dims, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  Tensor mean(std::optional<DType> dtype = std::nullopt) const;
  Tensor mean(Dims dims, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  Tensor prod(std::optional<DType> dtype = std::nullopt) const;
  Tensor prod(int64_t dim, bool keepdim = false, std::optional<DType> dtype = std::nullopt) const;
  Tensor max() const;
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;  // (values, indices)
  Tensor min() const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor amax(Dims dims = std::vector<int64_t>{}, bool keepdim = false) const;  // {} = all dims
  Tensor amin(Dims dims = std::vector<int64_t>{}, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor var(std::optional<Dims> dims = std::nullopt, double correction = 1, bool keepdim = false) const;
  Tensor std(std::optional<Dims> dims = std::nullopt, double correction = 1, bool keepdim = false) const;
  // p: 2 (default), 1, INFINITY, -INFINITY or any other positive number; "fro" is p = 2 over the dims.
  Tensor norm(double p = 2, std::optional<Dims> dims = std::nullopt, bool keepdim = false) const;
  Tensor logsumexp(Dims dims, bool keepdim = false) const;
  Tensor any() const;
  Tensor any(int64_t dim, bool keepdim = false) const;
  Tensor all() const;
  Tensor all(int64_t dim, bool keepdim = false) const;
  Tensor cumsum(int64_t dim, std::optional<DType> dtype = std::nullopt) const;
  Tensor cumprod(int64_t dim, std::optional<DType> dtype = std::nullopt) const;

  // ---- matrix products, softmax -------------------------------------------------------------------
  Tensor matmul(const Tensor& other) const;
  Tensor mm(const Tensor& other) const;
  Tensor bmm(const Tensor& other) const;
  Tensor dot(const Tensor& other) const;
  Tensor outer(const Tensor& other) const;
  Tensor softmax(int64_t dim, std::optional<DType> dtype = std::nullopt) const;
  Tensor log_softmax(int64_t dim, std::optional<DType> dtype = std::nullopt) const;

  // ---- indexing ---------------------------------------------------------------------------------
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Scalar& value) const;
  Tensor& scatter_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor& scatter_add_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1) const;
  Tensor& index_add_(int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1);
  // indices: one (optional) index tensor per leading dim, as self[i0, i1, ...] in PyTorch.
  Tensor index(const std::vector<std::optional<Tensor>>& indices) const;
  Tensor index_put(const std::vector<std::optional<Tensor>>& indices, const Tensor& values, bool accumulate = false) const;
  Tensor& index_put_(const std::vector<std::optional<Tensor>>& indices, const Tensor& values, bool accumulate = false);
  Tensor masked_fill(const Tensor& mask, const Scalar& value) const;
  Tensor& masked_fill_(const Tensor& mask, const Scalar& value);
  Tensor masked_select(const Tensor& mask) const;
  Tensor nonzero() const;
  Tensor flip(const Shape& dims) const;
  Tensor roll(const Shape& shifts, const Shape& dims = {}) const;
  Tensor repeat(const Shape& repeats) const;
  Tensor repeat_interleave(int64_t repeats, std::optional<int64_t> dim = std::nullopt) const;
  Tensor repeat_interleave(const Tensor& repeats, std::optional<int64_t> dim = std::nullopt) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  std::tuple<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;
  std::tuple<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false, bool stable = false) const;
  Tensor argsort(int64_t dim = -1, bool descending = false, bool stable = false) const;

  // ---- random fills (in place) --------------------------------------------------------------------
  Tensor& uniform_(double from = 0, double to = 1, Generator* gen = nullptr);
  Tensor& normal_(double mean = 0, double std = 1, Generator* gen = nullptr);
  Tensor& bernoulli_(double p = 0.5, Generator* gen = nullptr);
  Tensor& random_(int64_t from, int64_t to, Generator* gen = nullptr);  // integers in [from, to)

  // ---- autograd (src/autograd) -----------------------------------------------------------------
  bool requires_grad() const;
  Tensor& requires_grad_(bool requires_grad = true);  // floating-point tensors only
  bool is_leaf() const;        // no grad_fn: made by the user, or does not require grad
  Tensor grad() const;         // accumulated gradient of a leaf (or of a tensor that retains grad)
  void set_grad(const Tensor& grad) const;
  void zero_grad(bool set_to_none = true) const;
  // Computes the gradient of this tensor (a scalar, or with `gradient` of its shape) w.r.t. the leaves.
  void backward(const Tensor& gradient = Tensor(), std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;
  Tensor detach() const;       // same data, no history
  Tensor& detach_();
  void retain_grad() const;    // keep .grad() on a non-leaf
  bool retains_grad() const;
  std::shared_ptr<Node> grad_fn() const;
  // A hook on the gradient of this tensor: returns a replacement gradient or an undefined tensor to
  // keep it. Returns a handle for remove_hook.
  uint64_t register_hook(std::function<Tensor(const Tensor&)> hook) const;
  // Runs after the gradient of this leaf has been accumulated into grad() (the hook of data parallel).
  uint64_t register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const;
  void remove_hook(uint64_t handle) const;

  // Printing in PyTorch's style: tensor([[1.0000, 2.5000], ...], dtype=float64).
  std::string str() const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Operators, as in PyTorch. Comparisons return bool tensors.
Tensor operator-(const Tensor& a);
Tensor operator~(const Tensor& a);
#define TS_BINARY_OPERATOR(op)                             \
  Tensor operator op(const Tensor& a, const Tensor& b);    \
  Tensor operator op(const Tensor& a, const Scalar& b);    \
  Tensor operator op(const Scalar& a, const Tensor& b);
TS_BINARY_OPERATOR(+) TS_BINARY_OPERATOR(-) TS_BINARY_OPERATOR(*) TS_BINARY_OPERATOR(/)
TS_BINARY_OPERATOR(%) TS_BINARY_OPERATOR(&) TS_BINARY_OPERATOR(|) TS_BINARY_OPERATOR(^)
TS_BINARY_OPERATOR(==) TS_BINARY_OPERATOR(!=) TS_BINARY_OPERATOR(<) TS_BINARY_OPERATOR(<=)
TS_BINARY_OPERATOR(>) TS_BINARY_OPERATOR(>=)
#undef TS_BINARY_OPERATOR
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, const Scalar& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Scalar& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Scalar& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Scalar& b);

}  // namespace tessera
