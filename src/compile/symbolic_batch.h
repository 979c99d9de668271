// Symbolic batch sizes: the graphs of two captures that differ only in their batch size made one
// graph that is a function of it (ts::compile's `dynamic = true`; DESIGN.md "The compiler").
//
// Note [Symbolic batch]: a compiled function with `dynamic = true` captures its first batch size as
// any other (a variant). When a later call misses only because its batch size differs (dim 0 of its
// first tensor argument that has a dim), it is captured as a second variant, and the two are unified:
// their graphs (forward and backward) must be the same nodes, ops, inputs and attributes, and every
// integer that differs between them (the sizes, strides and offsets of values and guards, positional
// integer attributes such as reshape's sizes, integer scalars, normalized shapes) must lie on a line
// a * B + b with integer a and b through both captures. Floating-point attributes must be equal (a
// host-computed 1.0 / B is not a whole-number line, so that program stays one variant per size).
// The unified variant then answers every later batch size B >= 2 without running the program: the
// graphs are instantiated at B, checked by the verifier (the meta functions re-infer every output
// from the instantiated inputs and attributes, so an attribute the line predicts wrongly for B makes
// the instantiation fail and that call is captured instead), planned, and kept per batch size
// (at most kMaxBatchInstances; the oldest goes first). Batch sizes 0 and 1 are never instantiated:
// like PyTorch, they are specialized (size 1 broadcasts), so they are captured as variants of their
// own. Instances are not variants: they do not count towards the recompile limit.
//
// What two points cannot show: an integer that depends on B other than linearly (B * B, B / 2 on
// sizes where the line happens to be whole) fits the line through the two captures and is wrong
// elsewhere. Where such an integer is a shape, the verifier catches it at instantiation unless the
// wrong shape is self-consistent (a factory of B * B elements reduced to a scalar); PyTorch's symbolic
// tracing would see the expression itself. The backend codegen generates kernels for each instance's
// sizes (a new batch size builds kernels, cached on disk; the program is not run again).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compile/graph.h"

namespace tessera::compiler {

// An integer of a graph as a function of the batch size B.
struct AffineInt {
  int64_t a = 0, b = 0;
  int64_t at(int64_t batch) const { return a * batch + b; }
  bool operator==(const AffineInt&) const = default;
};

// The line through (b1, v1) and (b2, v2) with whole coefficients; nullopt when there is none.
std::optional<AffineInt> fit_affine(int64_t b1, int64_t v1, int64_t b2, int64_t v2);

// The integers of a graph that may depend on the batch size, in a fixed order: each value's sizes,
// strides and storage offset; each node's positional ints, integer scalars and normalized shape.
std::vector<int64_t> batch_ints(const Graph& g);
void set_batch_ints(Graph& g, const std::vector<int64_t>& ints);  // in batch_ints' order
// The same for one tensor's metadata: sizes, strides, offset.
std::vector<int64_t> batch_ints(const TensorMeta& m);
void set_batch_ints(TensorMeta& m, const std::vector<int64_t>& ints);

// A graph whose batch-dependent integers are lines in B.
struct SymbolicGraph {
  Graph base;                  // the first capture's graph
  std::vector<AffineInt> ints;  // in batch_ints' order
  int symbolic = 0;             // integers that depend on B (a != 0)
  Graph at(int64_t batch) const;
  // "%3 sizes[0] = 16*B" lines for the integers that depend on B, for compile_explain.
  std::string describe() const;
};

// The two captures' graphs, at batch sizes b1 != b2, made one; nullopt with `why` naming the first
// difference that is not a whole-number line in the batch size.
std::optional<SymbolicGraph> unify_graphs(const Graph& g1, int64_t b1, const Graph& g2, int64_t b2, std::string* why);

// The batch size of a call: dim 0 of its first defined tensor argument with at least one dim; -1
// when there is none.
int64_t batch_size_of(const std::vector<Tensor>& args);

constexpr int kMaxBatchInstances = 32;

}  // namespace tessera::compiler
