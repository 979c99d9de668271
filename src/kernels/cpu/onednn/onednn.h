// oneDNN behind the CPU kernels' entry points: conv.cpp and matmul.cpp (the kernels of the conv and
// gemm slots) first offer their call to the functions below, which run it through oneDNN and return
// true when the shape is one where oneDNN measured faster, and return false (doing nothing) otherwise,
// so that the kernel's own code runs. The native kernels stay the fallback and the reference in tests
// (tests/kernels/test_onednn.cpp).
//
// This header includes no oneDNN header: the dispatched kernel files (compiled once per ISA level,
// Note [ISA namespaces]) include it, while the oneDNN calls themselves are compiled once, for plain
// x86-64, in kernels/cpu/onednn/*.cpp. oneDNN picks its own instruction set at run time (its JIT
// generates AVX-512 / AVX-512-BF16 / AMX code where the CPU has them), so it does not follow
// TESSERA_CPU_ISA; TESSERA_ONEDNN=0 switches it off.
//
// Note [oneDNN where it wins]: the rule, per op and per shape class, from bench/micro/bench_onednn.cpp
// (figures in bench/NOTES.md, "oneDNN on the CPU"; AMD EPYC, 2 threads, AVX-512 with BF16):
//  - convolution, forward and both backward passes, float32 and bfloat16, groups == 1: oneDNN (its
//    direct JIT kernels on blocked layouts, the operands reordered on the way in and out). Grouped
//    convolutions (depthwise included) stay native: oneDNN's grouped kernels on plain layouts ran
//    slower than im2col + GEMM per group.
//  - matmul: bfloat16 through oneDNN (AVX-512-BF16 dot products accumulating in float32, where the
//    native path widens to float32 and calls sgemm); float32 stays with OpenBLAS, which matched or beat
//    oneDNN's kernel at every size measured.
//  - float16 and float64 stay native everywhere.
//  - pooling and batch norm stay native: both are memory-bound and the native kernels already stream
//    at the copy bandwidth (bench/NOTES.md).
// Determinism: oneDNN's results are the same from run to run at a given thread count, but unlike the
// native kernels (Note [Conv blocks], Note [One thread pool]) they may differ in the last bits between
// thread counts. Tests that pin the native kernels' thread-count invariance switch oneDNN off
// (ScopedOnednn).
#pragma once
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

// TESSERA_ONEDNN=all: oneDNN for every call it has a kernel for, whatever the rule says (to measure
// the rule's alternatives: bench/run_onednn_choice.py).
bool everywhere();

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
