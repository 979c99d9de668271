// Helpers shared by the ops' meta functions: device checks, out= handling, dtype conversion.
#pragma once
#include <initializer_list>
#include <string>
#include <utility>

#include "tensor/tensor_impl.h"
#include "tessera/functions.h"

namespace tessera {

// Raises DeviceError unless every defined tensor is on the same device as the first.
void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors);
// Raises ValueError for an undefined tensor argument.
void check_defined(const char* op, const Tensor& t, const char* arg);
// For an out= argument: checks device, that the result dtype `dtype` can be cast to out's, and that
// out has the result's sizes (an empty out is resized). Returns out.
Tensor& prepare_out(const char* op, Tensor& out, const Shape& sizes, DType dtype, Device device);
// `t` in dtype `d` (the same tensor when it already is).
Tensor cast_to(const Tensor& t, DType d);
// Writes `result` into `out` (same sizes), converting dtype, and bumps out's version.
void write_out(Tensor& out, const Tensor& result);
// Raises on in-place ops whose output overlaps an input in a way that reads stale data, and on writes
// into expanded (stride-0) tensors. Mirrors PyTorch's assert_no_internal_overlap.
void check_writable(const char* op, const Tensor& out);
Scalar scalar_from_tensor(const Tensor& t);  // item() without the op name
// The integers every value of [lo, hi] of which a dtype holds exactly: an integer dtype's whole
// range, a floating dtype's run of consecutive integers (random_'s bounds, integer thresholds).
std::pair<int64_t, int64_t> exact_int_range(DType t);

// Note [Channels-last outputs]: as PyTorch, convolution and pooling ops return channels-last results
// when an input is channels-last, on every device, so that an NHWC network stays NHWC without copies.
// "Is channels-last" means 4-D, dense in NHWC order and not also row-major contiguous (a tensor that is
// both, e.g. (N, C, 1, 1), says nothing about the caller's preference and keeps the default).
bool suggests_channels_last(const Tensor& t);
// A new uninitialized tensor, channels-last (4-D sizes) or contiguous.
Tensor make_empty_in_format(const Shape& sizes, DType dtype, Device device, bool channels_last);

// Note [Output layout]: as PyTorch's TensorIterator (and preserve_format), elementwise ops, clone() and
// to() lay their result out after their inputs. When every input has the result's shape: row-major if
// all are contiguous, else the first input's strides if all share them and they are dense. Otherwise
// the dims are ordered as TensorIterator's reorder_dimensions orders them: for each pair of dims, the
// first input whose strides differ there decides (an input that broadcasts along either dim has no
// say), equal strides put the smaller size inside, and no opinion keeps row-major order; the result is
// dense in that order. So an NHWC network stays NHWC through its activations, residual adds and
// casts, a channels-last input never costs a layout copy per op, and a transposed operand next to a
// broadcast one gives the strides PyTorch gives (which decides whether a later view() succeeds).
// contiguous() is the way to ask for row-major.
//
// `t`'s strides if it is such a dense layout of its own shape, else an empty Shape (for a contiguous
// or empty t as well: callers then allocate row-major).
Shape dense_permuted_strides(const Tensor& t);
// A new uninitialized tensor of `sizes`, laid out as Note [Output layout] says for `inputs` (undefined
// entries skipped).
Tensor make_empty_like_inputs(const Shape& sizes, DType dtype, Device device,
                              std::initializer_list<const Tensor*> inputs);
Tensor make_empty_like_inputs(const Shape& sizes, DType dtype, Device device, const std::vector<const Tensor*>& inputs);

}  // namespace tessera
