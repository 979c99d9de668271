// Kernel slots of the random family. Every kernel draws from Philox4x32-10 under the contract of
// Note [Philox stream] (runtime/philox.h): the op has already reserved the counters, and element i of
// the output -- the i-th element in row-major order of its logical shape, whatever its strides --
// takes its words from block (params.offset + i / E). A kernel never touches a Generator, so a CPU and
// a CUDA kernel given the same Params write the same numbers.
#pragma once
#include <cstdint>

#include "ops/kernel_slot.h"
#include "tessera/tensor.h"

namespace tessera {

// Grid-invariant state of a random kernel: the key and the first reserved counter. Under CUDA graph
// capture (Note [Philox under graph capture], runtime/philox_capture.h) the key and a base counter are
// read from device memory at run time: seed = *seed_ptr, first counter = *offset_ptr + offset. Eager
// launches (and every CPU kernel) leave the pointers null.
struct PhiloxParams {
  uint64_t seed = 0;
  uint64_t offset = 0;
  const uint64_t* seed_ptr = nullptr;
  const uint64_t* offset_ptr = nullptr;
};

// Words of one Philox block each element takes, for each kind of draw (Note [Philox stream]).
// The ops reserve ceil(n * words / 4) counters with these.
inline int uniform_words(DType t) { return t == DType::Float64 ? 2 : 1; }
inline int normal_words(DType t) { return t == DType::Float64 ? 4 : 2; }
inline int random_int_words(uint64_t range) { return range > (uint64_t{1} << 32) || range == 0 ? 2 : 1; }
inline constexpr int kBernoulliWords = 1;
inline constexpr int kRandpermWords = 2;     // a 64-bit sort key per element
inline constexpr int kMultinomialWords = 2;  // a 53-bit uniform per sample or per category

// out (floating) = from + (to - from) * u, u uniform in [0, 1), computed in float64 and rounded once to
// out's dtype; a value that rounds up to `to` becomes the largest value of out's dtype below `to`.
using UniformKernelFn = void(const Tensor& out, double from, double to, PhiloxParams params);
extern KernelSlot<UniformKernelFn> uniform_kernel;

// out (floating) = mean + std * z, z standard normal by Box-Muller.
using NormalKernelFn = void(const Tensor& out, double mean, double std, PhiloxParams params);
extern KernelSlot<NormalKernelFn> normal_kernel;

// out (any dtype) = 1 with probability p, else 0: word * 2^-32 < p.
using BernoulliScalarKernelFn = void(const Tensor& out, double p, PhiloxParams params);
extern KernelSlot<BernoulliScalarKernelFn> bernoulli_scalar_kernel;

// out[i] = 1 with probability p[i]; `p` is contiguous, floating, with out's sizes. Raises ValueError
// (before drawing) when a p is outside [0, 1] or nan.
using BernoulliTensorKernelFn = void(const Tensor& out, const Tensor& p, PhiloxParams params);
extern KernelSlot<BernoulliTensorKernelFn> bernoulli_tensor_kernel;

// out (any dtype) = from + (bits mod range); 32 bits per element when range <= 2^32, else 64 bits
// from two words (range 0 means 2^64). Modulo, as PyTorch: the bias is below range / 2^32 (or 2^64).
using RandomIntKernelFn = void(const Tensor& out, int64_t from, uint64_t range, PhiloxParams params);
extern KernelSlot<RandomIntKernelFn> random_int_kernel;

// out (1-D, contiguous, n elements) = a permutation of 0..n-1: the indices sorted by their 64-bit
// Philox keys (ties by index), so a radix sort on a GPU gives the same permutation.
using RandpermKernelFn = void(const Tensor& out, PhiloxParams params);
extern KernelSlot<RandpermKernelFn> randperm_kernel;

// out (rows, num_samples) int64 from probs (rows, k) float64 contiguous. With replacement, sample
// (r, j) is element r * num_samples + j: its uniform u picks the first category whose cumulative sum
// exceeds u * row_sum. Without replacement, category (r, c) is element r * k + c: key p / E with
// E = -log(1 - u) exponential, and the num_samples largest keys are taken (ties by index) in
// descending key order. Raises ValueError (before drawing) for negative, inf or nan probabilities,
// a row summing to 0, or fewer nonzero categories than samples without replacement.
using MultinomialKernelFn = void(const Tensor& out, const Tensor& probs, bool replacement, PhiloxParams params);
extern KernelSlot<MultinomialKernelFn> multinomial_kernel;

}  // namespace tessera
