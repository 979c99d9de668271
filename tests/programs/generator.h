// The random program generator: chains of 3 to 12 ops over random shapes (ranks 0 to 4, sizes 1, small
// primes and powers of two), inputs stored contiguously, transposed or sliced, in float64, float32,
// bfloat16 or int64. The generator tracks every value's shape and dtype itself, so that what it emits
// is a valid program; where an op's rules reject its arguments anyway (a view of non-viewable
// strides), both sides must raise at the same step.
//
// It is meant for reuse: the compiler's tests generate with it and compare compiled with eager.
#pragma once
#include <cstdint>

#include "programs/program.h"

namespace tessera::programs {

struct GeneratorOptions {
  int min_ops = 3;
  int max_ops = 12;
  int64_t max_numel = 2048;   // per value
  bool allow_int64 = true;    // integer programs (no gradients)
  bool allow_bfloat16 = true;
  bool grads = true;          // floating inputs require grad (most of them)
};

// The program for `seed`: the same seed gives the same program with the same build.
Program generate_program(uint64_t seed, const GeneratorOptions& opts = {});

}  // namespace tessera::programs
