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
// (bench/run_onednn_choice.py; figures in bench/NOTES.md, "oneDNN on the CPU", and
// bench/results/onednn-choice.json; AMD EPYC, 2 threads, AVX-512 with BF16). Speedups are native time
// over oneDNN time, of the fastest samples:
//  - convolution, forward and both backward passes, float32 and bfloat16: oneDNN (its direct JIT
//    kernels on blocked layouts, operands reordered on the way in and out), which ran a 3x3 conv of
//    64 channels on 56x56 4x faster forward + backward in either dtype, 3 to 5x in channels-last, the
//    CNN's second layer (32 -> 64 on 13x13) 2 to 3x, grouped and depthwise convs 1.1 to 3x. Except:
//      - fewer than 4 input channels per group (an image's first layer): native, 0.2 to 0.9x;
//      - 1x1 kernels: native (both sides are one GEMM; the native one reads the input in place), 0.5
//        to 0.7x;
//      - strides above 1: native (1.1 to 1.2x in float32, 0.75x in bfloat16: not worth the rule).
//  - matmul, float32 and bfloat16: oneDNN for products of at least 2^25 multiply-adds in all (1024^3:
//    1.9x in float32, 5.5x in bfloat16; the MLP's 128x784x512: 2.2x and 1.1x), native below (64^3:
//    0.2 to 0.3x, oneDNN's fixed cost per call; 256^3 and a batch of 16 128x64x128: parity).
//  - float16 and float64 stay native everywhere.
//  - pooling and batch norm have no oneDNN path: see bench/NOTES.md for the comparison.
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
