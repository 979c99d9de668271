// The op layer's free functions: PyTorch's torch.* namespace. Every op validates its inputs in its
// meta function (src/ops) and raises the error class of error.h with the op's name in the message.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tessera/generator.h"
#include "tessera/tensor.h"

namespace tessera {

// ---- creation ---------------------------------------------------------------------------------
// The default float dtype is float32; integer fills and aranges infer int64, bool fills bool.
Tensor empty(const Shape& sizes, TensorOptions opts = {});
Tensor empty_strided(const Shape& sizes, const Shape& strides, TensorOptions opts = {});
Tensor zeros(const Shape& sizes, TensorOptions opts = {});
Tensor ones(const Shape& sizes, TensorOptions opts = {});
Tensor full(const Shape& sizes, const Scalar& value, TensorOptions opts = {});
Tensor arange(const Scalar& end, TensorOptions opts = {});
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1, TensorOptions opts = {});
Tensor linspace(double start, double end, int64_t steps, TensorOptions opts = {});
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, TensorOptions opts = {});
// *_like: same sizes (contiguous), dtype and device as `t` unless opts say otherwise.
Tensor empty_like(const Tensor& t, TensorOptions opts = {});
Tensor zeros_like(const Tensor& t, TensorOptions opts = {});
Tensor ones_like(const Tensor& t, TensorOptions opts = {});
Tensor full_like(const Tensor& t, const Scalar& value, TensorOptions opts = {});
Tensor rand_like(const Tensor& t, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor randn_like(const Tensor& t, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor rand(const Shape& sizes, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor randn(const Shape& sizes, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& sizes, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor randint(int64_t high, const Shape& sizes, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor bernoulli(const Tensor& p, Generator* gen = nullptr);  // each element 1 with probability p
Tensor randperm(int64_t n, TensorOptions opts = kInt64, Generator* gen = nullptr);
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false, Generator* gen = nullptr);
// From host values: a copy of `values` laid out as `sizes` (a 1-D tensor when sizes is empty).
template <class T> Tensor tensor(const std::vector<T>& values, const Shape& sizes = {}, TensorOptions opts = {});
Tensor tensor(std::initializer_list<double> values, TensorOptions opts = {});
Tensor scalar_tensor(const Scalar& value, TensorOptions opts = {});
// Copies `sizes` elements of `dtype` from host memory at `data`.
Tensor from_blob(const void* data, const Shape& sizes, DType dtype);

// ---- copies and views (free-function spellings of the Tensor methods) -----------------------
Tensor clone(const Tensor& t);
Tensor contiguous(const Tensor& t);
Tensor reshape(const Tensor& t, const Shape& sizes);
Tensor permute(const Tensor& t, const Shape& dims);
Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1);
Tensor flatten(const Tensor& t, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor squeeze(const Tensor& t);
Tensor unsqueeze(const Tensor& t, int64_t dim);
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& t, int64_t dim, int64_t index);
Tensor diagonal(const Tensor& t, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
Tensor as_strided(const Tensor& t, const Shape& sizes, const Shape& strides, std::optional<int64_t> storage_offset = std::nullopt);
// A copy of `base` (made contiguous) whose view (sizes, strides, storage offset) is overwritten with
// `src`: the inverse of as_strided, as torch.as_strided_scatter.
Tensor as_strided_scatter(const Tensor& base, const Tensor& src, const Shape& sizes, const Shape& strides,
                          int64_t storage_offset = 0);
std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& tensors);
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op = "broadcast_shapes");

// ---- unary ----------------------------------------------------------------------------------
#define TS_UNARY_FN(name) \
  Tensor name(const Tensor& x); \
  Tensor& name##_out(const Tensor& x, Tensor& out);
TS_UNARY_FN(neg) TS_UNARY_FN(abs) TS_UNARY_FN(exp) TS_UNARY_FN(exp2) TS_UNARY_FN(log) TS_UNARY_FN(log2)
TS_UNARY_FN(log1p) TS_UNARY_FN(expm1) TS_UNARY_FN(sqrt) TS_UNARY_FN(rsqrt) TS_UNARY_FN(sin)
TS_UNARY_FN(cos) TS_UNARY_FN(tan) TS_UNARY_FN(tanh) TS_UNARY_FN(sigmoid) TS_UNARY_FN(relu)
TS_UNARY_FN(silu) TS_UNARY_FN(erf) TS_UNARY_FN(floor) TS_UNARY_FN(ceil) TS_UNARY_FN(round)
TS_UNARY_FN(trunc) TS_UNARY_FN(sign) TS_UNARY_FN(reciprocal) TS_UNARY_FN(logical_not)
TS_UNARY_FN(bitwise_not)
#undef TS_UNARY_FN
Tensor gelu(const Tensor& x, const std::string& approximate = "none");  // "none" (erf) or "tanh"
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);
Tensor hardswish(const Tensor& x);  // x * relu6(x + 3) / 6
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);
Tensor nan_to_num(const Tensor& x, std::optional<double> nan = std::nullopt,
                  std::optional<double> posinf = std::nullopt, std::optional<double> neginf = std::nullopt);

// ---- binary (broadcasting; PyTorch's type promotion) ----------------------------------------
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor add(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor& add_out(const Tensor& a, const Tensor& b, Tensor& out, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor sub(const Tensor& a, const Scalar& b, const Scalar& alpha = 1);
Tensor& sub_out(const Tensor& a, const Tensor& b, Tensor& out, const Scalar& alpha = 1);
Tensor div(const Tensor& a, const Tensor& b, const std::string& rounding_mode = "");
Tensor div(const Tensor& a, const Scalar& b, const std::string& rounding_mode = "");
Tensor& div_out(const Tensor& a, const Tensor& b, Tensor& out, const std::string& rounding_mode = "");
#define TS_BINARY_FN(name)                                  \
  Tensor name(const Tensor& a, const Tensor& b);            \
  Tensor name(const Tensor& a, const Scalar& b);            \
  Tensor& name##_out(const Tensor& a, const Tensor& b, Tensor& out);
TS_BINARY_FN(mul) TS_BINARY_FN(pow) TS_BINARY_FN(maximum) TS_BINARY_FN(minimum) TS_BINARY_FN(fmod)
TS_BINARY_FN(remainder) TS_BINARY_FN(atan2) TS_BINARY_FN(eq) TS_BINARY_FN(ne) TS_BINARY_FN(lt)
TS_BINARY_FN(le) TS_BINARY_FN(gt) TS_BINARY_FN(ge) TS_BINARY_FN(logical_and) TS_BINARY_FN(logical_or)
TS_BINARY_FN(logical_xor) TS_BINARY_FN(bitwise_and) TS_BINARY_FN(bitwise_or) TS_BINARY_FN(bitwise_xor)
TS_BINARY_FN(bitwise_left_shift) TS_BINARY_FN(bitwise_right_shift)
#undef TS_BINARY_FN
Tensor pow(const Scalar& base, const Tensor& exponent);
Tensor logaddexp(const Tensor& a, const Tensor& b);  // log(exp(a) + exp(b)) without overflow
// relu's (and threshold's) gradient in one pass: self <= threshold ? 0 : grad_output (PyTorch's
// aten::threshold_backward; a NaN in self passes the gradient).
Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, const Scalar& threshold);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& condition, const Tensor& a, const Scalar& b);
Tensor where(const Tensor& condition, const Scalar& a, const Tensor& b);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
Tensor clamp(const Tensor& x, const std::optional<Tensor>& min, const std::optional<Tensor>& max);
Tensor lerp(const Tensor& start, const Tensor& end, const Scalar& weight);
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);
Tensor addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
Tensor addcdiv(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
bool equal(const Tensor& a, const Tensor& b);  // same sizes and the same values

// ---- reductions -----------------------------------------------------------------------------
// `dims` empty means every dim. 16-bit float inputs accumulate in float32.
Tensor sum(const Tensor& x, Dims dims = std::vector<int64_t>{}, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& x, Dims dims = std::vector<int64_t>{}, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
Tensor prod(const Tensor& x, Dims dims = std::vector<int64_t>{}, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
Tensor amax(const Tensor& x, Dims dims = std::vector<int64_t>{}, bool keepdim = false);
Tensor amin(const Tensor& x, Dims dims = std::vector<int64_t>{}, bool keepdim = false);
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor var(const Tensor& x, std::optional<Dims> dims = std::nullopt, double correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, std::optional<Dims> dims = std::nullopt, double correction = 1, bool keepdim = false);
std::tuple<Tensor, Tensor> var_mean(const Tensor& x, std::optional<Dims> dims = std::nullopt, double correction = 1, bool keepdim = false);
Tensor norm(const Tensor& x, double p = 2, std::optional<Dims> dims = std::nullopt, bool keepdim = false);
Tensor norm(const Tensor& x, const std::string& p, std::optional<Dims> dims = std::nullopt, bool keepdim = false);  // "fro"
// Per-tensor vector norms (all elements; ord 1, 2, inf fused, other ord >= 0 as norm()): 0-dim results of each tensor's dtype.
std::vector<Tensor> _foreach_norm(const std::vector<Tensor>& tensors, double ord = 2);
// tensors[i] *= scalar in place (scalar: one-element floating tensor on their device; read there, no host sync).
void _foreach_mul_(const std::vector<Tensor>& tensors, const Tensor& scalar);
Tensor logsumexp(const Tensor& x, Dims dims, bool keepdim = false);
Tensor any(const Tensor& x, Dims dims = std::vector<int64_t>{}, bool keepdim = false);
Tensor all(const Tensor& x, Dims dims = std::vector<int64_t>{}, bool keepdim = false);
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);

// ---- matrix products ------------------------------------------------------------------------
Tensor matmul(const Tensor& a, const Tensor& b);  // PyTorch's broadcasting rules
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor addmm(const Tensor& input, const Tensor& a, const Tensor& b, const Scalar& beta = 1, const Scalar& alpha = 1);
Tensor baddbmm(const Tensor& input, const Tensor& a, const Tensor& b, const Scalar& beta = 1, const Scalar& alpha = 1);
Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt);  // x W^T + b
Tensor dot(const Tensor& a, const Tensor& b);
Tensor outer(const Tensor& a, const Tensor& b);
// Einstein summation over single-letter subscripts with "->" and "..." (e.g. "bhqd,bhkd->bhqk").
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

// ---- softmax --------------------------------------------------------------------------------
Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = std::nullopt);

// ---- indexing and joining -------------------------------------------------------------------
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha = 1);
Tensor index(const Tensor& x, const std::vector<std::optional<Tensor>>& indices);
Tensor index_put(const Tensor& x, const std::vector<std::optional<Tensor>>& indices, const Tensor& values, bool accumulate = false);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value);
Tensor masked_select(const Tensor& x, const Tensor& mask);
Tensor nonzero(const Tensor& x);  // (n, ndim) int64
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = std::nullopt);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& split_sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
// pad: (left, right) pairs from the last dim backwards, as torch.nn.functional.pad.
// mode: "constant", "reflect", "replicate".
Tensor pad(const Tensor& x, const std::vector<int64_t>& pad, const std::string& mode = "constant", double value = 0);
Tensor flip(const Tensor& x, const Shape& dims);
Tensor roll(const Tensor& x, const Shape& shifts, const Shape& dims = {});
Tensor repeat(const Tensor& x, const Shape& repeats);
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim = std::nullopt);
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim = std::nullopt);
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
// unique: sorted unique values; optionally the inverse indices and the counts (empty tensors if not asked).
std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& x, bool sorted = true, bool return_inverse = false,
                                          bool return_counts = false, std::optional<int64_t> dim = std::nullopt);

// ---- convolution and pooling (NCHW) ----------------------------------------------------------
// A pair of sizes for 2-D ops: `2` means (2, 2); `{2, 3}` means (2, 3).
struct IntPair {
  int64_t h, w;
  IntPair(int64_t v) : h(v), w(v) {}  // NOLINT
  IntPair(int64_t h_, int64_t w_) : h(h_), w(w_) {}
};
// x (N, C_in, L), weight (C_out, C_in / groups, K), bias (C_out) -> (N, C_out, L_out)
Tensor conv1d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
              int64_t stride = 1, int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1);
// x (N, C_in, H, W), weight (C_out, C_in / groups, KH, KW), bias (C_out) -> (N, C_out, H_out, W_out)
Tensor conv2d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
              IntPair stride = 1, IntPair padding = 0, IntPair dilation = 1, int64_t groups = 1);
// x (N, C_in, H, W), weight (C_in, C_out / groups, KH, KW) -> (N, C_out, H_out, W_out)
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = std::nullopt,
                        IntPair stride = 1, IntPair padding = 0, IntPair output_padding = 0, int64_t groups = 1,
                        IntPair dilation = 1);
// stride defaults to the kernel size. Indices are flat positions within each (H, W) plane, int64.
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, IntPair kernel_size,
                                                   std::optional<IntPair> stride = std::nullopt, IntPair padding = 0,
                                                   IntPair dilation = 1, bool ceil_mode = false);
Tensor max_pool2d(const Tensor& x, IntPair kernel_size, std::optional<IntPair> stride = std::nullopt,
                  IntPair padding = 0, IntPair dilation = 1, bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& x, IntPair kernel_size, std::optional<IntPair> stride = std::nullopt,
                  IntPair padding = 0, bool ceil_mode = false, bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& x, IntPair output_size);

// ---- threads --------------------------------------------------------------------------------
void set_num_threads(int n);  // OpenMP threads for CPU kernels, GEMMs included (OpenBLAS itself runs on one)
int get_num_threads();

}  // namespace tessera
