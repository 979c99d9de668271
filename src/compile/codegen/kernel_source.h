// Generated kernels (DESIGN.md "The compiler"): the source of one kernel per fusion group, as C++
// for the CPU or CUDA C++ for NVRTC.
//
// Note [Generated kernels]
// A kernel is specialized to its group's shapes, strides and dtypes, which the graph's guards fix:
// sizes and strides are constants of the source, so index arithmetic divides by constants and a
// broadcast is a zero stride. Views reaching the group are no copies: an operand is read through its
// own strides from its data pointer (which includes its offset). Before the source is written, the
// iteration space is canonicalized: size-1 dimensions are dropped, the dimensions are ordered by the
// first output's strides (outermost first, so a channels-last output is written in memory order), and
// neighbours that are contiguous in every operand are merged (a contiguous chain is one dimension).
//   CPU:  tiles of the innermost dimension over OpenMP threads, each tile one `omp simd` loop with
//         constant strides (the vectorizer's form); int64 indices.
//   CUDA: one thread per element in a grid-stride loop, or per vector of V elements where the
//         operands allow (Note [Vectorized pointwise kernels] in kernel_source.cpp); 32-bit indices
//         when every operand's span and the element count are below 2^31, 64-bit otherwise.
// Each node's value is a local of its compute type (pointwise_expr.h); only the group's outputs are
// stored. The executor checks at every call that each operand still has the layout the source was
// made for (KernelOperand::meta), so a kernel never reads through strides it was not made for.
#pragma once
#include <string>
#include <vector>

#include "compile/fusion.h"

namespace tessera::compiler {

enum class KernelTarget : uint8_t { Cpu, Cuda };

struct KernelOperand {
  int value = -1;
  bool output = false;
  TensorMeta meta;       // the layout the kernel reads or writes through
  std::vector<int64_t> strides;  // per canonical dimension, in elements
};

struct KernelSpec {
  std::string name;                 // "ts_fused_3_mul_add_relu"
  KernelTarget target = KernelTarget::Cpu;
  std::vector<int64_t> sizes;       // the canonical iteration space
  int64_t numel = 0;
  bool index64 = false;
  int vector_width = 1;             // CUDA pointwise: elements per thread and step where aligned
  // CUDA pointwise with invariant columns (Note [Invariant columns]): the grid's threads must be a
  // multiple of this many (the vectors of one row) when the kernel strides; 1: no constraint.
  int64_t thread_period = 1;
  std::vector<KernelOperand> operands;  // the group's outputs, then its inputs (literals are not operands)
  std::string function;             // the kernel's definition, without the preamble
  // A reduction group's kernel (reduction_source.cpp): its rows and their length; on CUDA, the threads
  // that share a row (a warp or the block) and the rows a block of rows_per_block * row_threads takes.
  int64_t rows = 0, inner = 0;
  int row_threads = 0, rows_per_block = 0;
  // CUDA reductions read from global memory once (Note [Persistent rows]): V elements per chunk, K
  // chunks per thread; 0 when the kernel has no such path.
  int persistent_vector = 0, persistent_chunks = 0;
  bool reduction() const { return rows > 0; }
};

// `index` numbers the kernel within its graph (it goes into the name). A reduction group's kernel is
// made by make_reduction_spec.
KernelSpec make_kernel_spec(const Graph& g, const FusionGroup& grp, KernelTarget target, int index);
KernelSpec make_reduction_spec(const Graph& g, const FusionGroup& grp, KernelTarget target, int index);

// The helpers every kernel of a target uses (loads, stores, 16-bit conversions, math).
const std::string& kernel_preamble(KernelTarget target);

// One translation unit: the preamble, then each kernel's function.
std::string translation_unit(KernelTarget target, const std::vector<const KernelSpec*>& kernels);

}  // namespace tessera::compiler
