// Helpers shared by the ops' meta functions: device checks, out= handling, dtype conversion.
#pragma once
#include <initializer_list>
#include <string>

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

// Note [Channels-last outputs]: as PyTorch, convolution and pooling ops return channels-last results
// when an input is channels-last, on every device, so that an NHWC network stays NHWC without copies.
// "Is channels-last" means 4-D, dense in NHWC order and not also row-major contiguous (a tensor that is
// both, e.g. (N, C, 1, 1), says nothing about the caller's preference and keeps the default).
bool suggests_channels_last(const Tensor& t);
// A new uninitialized tensor, channels-last (4-D sizes) or contiguous.
Tensor make_empty_in_format(const Shape& sizes, DType dtype, Device device, bool channels_last);

}  // namespace tessera
