// The fusion pass (DESIGN.md "The compiler", Note [Fusion by bytes saved]): which nodes of a graph run
// together as one generated kernel.
//
// A group is a set of pointwise nodes over one iteration space (the sizes of every output in it) on one
// device, or a reduction group: reductions over the same dims of one space with their pointwise
// prologue and epilogue (Note [Reduction groups] in reduction_schedule.cpp). Its inputs are read once and its outputs written once; the values between its nodes live in
// registers and are never stored. The pass decides the groups only; the graph keeps its nodes, and the
// executor (executor.h) runs a group's kernel where the group's last node stood.
#pragma once
#include <string>
#include <vector>

#include "compile/graph.h"

namespace tessera::compiler {

struct FusionOptions {
  int max_nodes = 64;     // nodes per kernel
  int max_operands = 24;  // distinct tensors a kernel reads or writes (scalar literals do not count)
  bool horizontal = true; // siblings reading one input fuse (the input is read once)
};

struct FusionGroup {
  std::vector<int> nodes;    // node indices, in graph order
  std::vector<int> inputs;   // values read from outside the group, in first-use order
  std::vector<int> outputs;  // values defined inside and read after it (or graph outputs), in order
  std::vector<int> literals; // inputs that are scalar constants (a fill_ of a fresh 0-dim buffer): the
                             // kernel holds their value and reads no memory for them
  Shape sizes;               // the iteration space (a reduction group's: its full space)
  std::vector<char> reduce_mask;  // a reduction group's reduced dims (Note [Reduction groups]); empty
                                  // for a pointwise group
  bool reduction() const { return !reduce_mask.empty(); }
  Device device = kCPU;
  int64_t bytes_saved = 0;   // bytes eager would write and read again for the values kept inside
};

struct FusionPlan {
  std::vector<FusionGroup> groups;
  std::vector<int> group_of_node;  // per node: its group, -1 for a node that runs on its own
  // Nodes no step needs any more: a scalar literal's fill_ whose only readers are groups.
  std::vector<char> absorbed;
};

// Whether code generation can compute node `n` of `g` inside a kernel (its op, attributes, dtypes):
// a pointwise op or a fusible reduction.
bool is_fusible(const Graph& g, const Node& n);

// The scalar constant a value holds when it is a fill_ of a fresh 0-dim buffer (a Scalar operand, as
// in `x * 2`); false otherwise.
bool scalar_literal(const Graph& g, int value, double* out = nullptr);

FusionPlan plan_fusion(const Graph& g, const FusionOptions& options = {});

// One line per group: "group 0 [4,8] cpu: mul %3, add %4, relu %5 <- %0 %1 -> %5 (saves 256 B)"; a
// reduction group names its reduced dims: "group 1 [4,8] reducing 1 cpu: amax %6, sub %7, ...".
std::string fusion_text(const Graph& g, const FusionPlan& plan);

}  // namespace tessera::compiler
