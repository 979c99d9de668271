// oneDNN behind the CPU kernels' entry points: conv.cpp, matmul.cpp, pool.cpp and batch_norm.cpp (the
// kernels of the conv, gemm, pooling and batch norm slots) first offer their call to the functions
// below, which run it through oneDNN and return true when the shape is one where oneDNN measured
// faster, and return false (doing nothing) otherwise, so that the kernel's own code runs. The native
// kernels stay the fallback and the reference in tests (tests/kernels/test_onednn*.cpp).
//
// This header includes no oneDNN header: the dispatched kernel files (compiled once per ISA level,
// Note [ISA namespaces]) include it, while the oneDNN calls themselves are compiled once, for plain
// x86-64, in kernels/cpu/onednn/*.cpp. oneDNN picks its own instruction set at run time (its JIT
// generates AVX-512 / AVX-512-BF16 / AMX code where the CPU has them), so it does not follow
// TESSERA_CPU_ISA; TESSERA_ONEDNN=0 switches it off.
//
// Note [oneDNN where it wins]: the rule, per op and per shape class, from bench/micro/bench_onednn.cpp
// (bench/run_onednn_choice.py; results/onednn-choice.json and bench/NOTES.md, "oneDNN on the CPU";
// AMD EPYC, 2 threads, AVX-512 with BF16). Speedups are native time over oneDNN time, fastest samples:
//  - convolution, forward and both backward passes, float32 and bfloat16: oneDNN (its direct JIT
//    kernels on blocked layouts, operands reordered on the way in and out) when there are at least 4
//    input channels per group. float32: 2.2x on the Fashion-MNIST CNN's second layer, 2.3x on a 3x3 of
//    64 channels at 56x56 (2.7 to 3.1x channels-last), 1.75x strided, 1.8 to 2.2x depthwise, 3x with 4
//    groups; bfloat16 2.5 to 6x. float32 pointwise convolutions (1x1, stride 1, unpadded, ungrouped)
//    stay native: oneDNN was 0.77x forward and 0.88x forward and backward on 128 channels at 28x28
//    (onednn-choice.json at a5b19e1; the 1.3 to 1.4x of an earlier measurement did not hold there).
//    With fewer input channels (an image's first
//    layer: 0.56 to 0.65x in float32) the native im2col kernel stays, except that bfloat16 grouped
//    and depthwise convolutions always take oneDNN (depthwise 3x3, 64 channels at 56x56: 2.95x,
//    2.61-4.19; in float32 that class is parity, 1.06x, 0.79-1.48, and stays native).
//  - matmul, float32 and bfloat16: oneDNN for products of at least 2^20 multiply-adds in all (1024^3:
//    1.85x in float32, 4.2x in bfloat16; the MLP's 128x784x512: 1.9x and 4x); native below (64^3:
//    1.2 to 1.5x on a quiet machine, but 3 to 5x slower while other work shared the cores, since
//    oneDNN splits a call statically over the threads and waits for a preempted one).
//  - float16 and float64, and conv_transpose2d with a bias, stay native.
//  - pooling (pool.cpp) and batch norm (batch_norm.cpp), memory-bound, medians of one run at a5b19e1
//    (bench/NOTES.md, "Pooling and batch norm through oneDNN"): oneDNN for channels-last max pooling
//    (1.3 to 6x), NCHW max pooling forward in bfloat16 (1.5 to 2.3x) and where the native kernel's
//    general path runs (float32 3x3 stride 2: 1.5x), every average and global average pooling (2.9 to
//    56x), every batch norm training forward (1.6 to 29x), and batch norm's inference forward and
//    backward except float32 channels-last below 2^22 elements (parity there). Native: NCHW max pooling
//    backward (0.23 to 0.35x), max pooling backward of bfloat16 overlapping windows in either layout
//    (1.06x and 1.05x: parity; oneDNN rounds between windows), NCHW float32 2x2 max pooling forward
//    (0.77x), batch norm's eval-mode backward (not measured).
// Determinism: oneDNN's results are the same from run to run at a given thread count, but unlike the
// native kernels (Note [Conv blocks], Note [One thread pool]) they may differ in the last bits between
// thread counts. Tests that pin the native kernels' thread-count invariance switch oneDNN off
// (ScopedOnednn).
#pragma once
#include "ops/batch_norm_kernel.h"
#include "ops/conv_kernel.h"
#include "ops/gemm_kernel.h"
#include "tessera/cpu.h"

namespace tessera::cpu::onednn {

// Each returns true when it ran the call through oneDNN, false when the native kernel is to run it.
// Preconditions are those of the slots (ops/conv_kernel.h, ops/gemm_kernel.h).
bool conv2d_forward(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& bias, const ConvGeometry& g);
bool conv2d_input_backward(const Tensor& out, const Tensor& grad, const Tensor& w, const Tensor& bias,
                           const ConvGeometry& g);
bool conv2d_weight_backward(const Tensor& out, const Tensor& grad, const Tensor& x, const ConvGeometry& g);
bool gemm(const GemmParams& p);
// Pooling (kernels/cpu/onednn/pool.cpp; Note [oneDNN max pooling indices]), preconditions those of the
// pooling slots (ops/conv_kernel.h).
bool max_pool2d_forward(const Tensor& out, const Tensor& indices, const Tensor& x, const PoolGeometry& g);
bool max_pool2d_backward(const Tensor& out, const Tensor& grad, const Tensor& indices, const PoolGeometry& g);
bool avg_pool2d_forward(const Tensor& out, const Tensor& x, const PoolGeometry& g);
bool avg_pool2d_backward(const Tensor& out, const Tensor& grad, const PoolGeometry& g);
bool adaptive_avg_pool2d_forward(const Tensor& out, const Tensor& x, const PoolGeometry& g);
bool adaptive_avg_pool2d_backward(const Tensor& out, const Tensor& grad, const PoolGeometry& g);
// Batch normalization (kernels/cpu/onednn/batch_norm.cpp), preconditions those of the batch norm slots
// (ops/batch_norm_kernel.h).
bool batch_norm_forward_training(const Tensor& y, const Tensor& save_mean, const Tensor& save_invstd, const Tensor& x,
                                 const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                                 const Tensor& running_var, const BatchNormShape& s, double momentum, double eps);
bool batch_norm_forward_inference(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias,
                                  const Tensor& running_mean, const Tensor& running_var, const BatchNormShape& s,
                                  double eps);
bool batch_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& dy,
                         const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& invstd,
                         const BatchNormShape& s, bool training, double eps);

// TESSERA_ONEDNN=all: oneDNN for every call it has a kernel for, whatever the rule says (to measure
// the rule's alternatives: bench/run_onednn_choice.py).
bool everywhere();
bool set_everywhere(bool on);  // returns the previous setting (tests)

// How many calls oneDNN has run since start-up (the tests check that a path they compare did run).
int64_t calls_taken();

// Sets oneDNN on or off for its lifetime and restores the previous setting (tests).
class ScopedOnednn {
 public:
  explicit ScopedOnednn(bool on) : saved_(set_onednn_enabled(on)) {}
  ~ScopedOnednn() { set_onednn_enabled(saved_); }
  ScopedOnednn(const ScopedOnednn&) = delete;
  ScopedOnednn& operator=(const ScopedOnednn&) = delete;

 private:
  bool saved_;
};

}  // namespace tessera::cpu::onednn
