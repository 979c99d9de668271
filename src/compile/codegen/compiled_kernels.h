// A graph's fusion groups as loaded kernels, and the call of one (the executor's kernel step).
//
// CPU groups of a graph go into one translation unit (one compiler process per graph: the compiler's
// start and the preamble cost more than the kernels); CUDA groups are one NVRTC program each, compiled
// in parallel. With TESSERA_COMPILE_DEBUG_DIR set, each graph's text, its fusion groups and the
// generated sources are written to a folder of their own in it (Note [Compiler debug output]).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "compile/codegen/kernel_source.h"
#include "compile/fusion.h"

namespace tessera::compiler {

struct CompiledKernel {
  KernelSpec spec;
  void* fn = nullptr;                 // CPU: void(void* const*); CUDA: a cudaKernel_t
  int device_index = -1;              // CUDA
  std::shared_ptr<const void> library;  // keeps the code loaded
};

// `label` names the graph in errors and in the debug folder ("forward", "backward").
std::vector<CompiledKernel> compile_groups(const Graph& g, const FusionPlan& plan, const std::string& label,
                                           const Graph* captured = nullptr);

// Runs k on its operands (the group's outputs, then its inputs, as k.spec.operands). Raises, naming
// the kernel and the operand, when an operand's sizes, strides, dtype or device are not those the
// kernel was generated for.
void run_kernel(const CompiledKernel& k, const std::vector<Tensor>& operands);

// The debug folder's path for a new graph, or "" when TESSERA_COMPILE_DEBUG_DIR is unset.
std::string debug_folder(const std::string& label);

}  // namespace tessera::compiler
