// The compiler's IR (DESIGN.md "The compiler"): a graph of op-table nodes over tensor values.
//
// A Graph is SSA: every value is defined once, by a graph input or by one node's output, and a node
// names only values defined before it. Nodes keep the order in which the program ran them; that order
// is also the order of their side effects (in-place writes, random draws), which passes must keep.
// A node is an OpId of the op table with the attributes of its call (OpAttrs, Note [Typed
// attributes]); its inputs are values or absent (an undefined optional tensor, -1). Each value carries
// the metadata the program saw (TensorMeta): the verifier re-infers it with the meta functions and
// compares (verify.cpp).
//
// Graph inputs are of three kinds: the function's arguments (bound per call), the module's parameters
// and buffers (bound by name, guarded by identity) and constants (tensors the program reached that
// existed before the capture, held by the graph; Note [Capture provenance] in capture.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ops/table/op_table.h"
#include "tessera/tensor.h"

namespace tessera::compiler {

struct TensorMeta {
  Shape sizes, strides;
  int64_t offset = 0;
  DType dtype = kFloat32;
  Device device = kCPU;
  bool requires_grad = false;
  bool operator==(const TensorMeta&) const = default;
  static TensorMeta of(const Tensor& t);
  int64_t numel() const;
  // Bytes of the smallest storage that holds this layout (0 for an empty tensor).
  int64_t span_bytes() const;
};
std::string to_string(const TensorMeta& m);  // "float32[4,8]{8,1}+0@cpu:grad"

// Saved: a backward graph's input that is a value of its forward graph (bound by position in the
// forward graph's saved outputs; Note [Joint graph] in capture.h).
enum class InputKind : uint8_t { Argument, Parameter, Constant, Saved };
const char* input_kind_name(InputKind k);

struct GraphInput {
  int value = -1;
  InputKind kind = InputKind::Argument;
  int64_t index = 0;   // Argument: its position among the flattened tensor arguments; Parameter: in the
                       // module's list; Saved: in the forward graph's saved outputs
  std::string name;    // Parameter: the module's name for it
  Tensor constant;     // Constant: the tensor itself (undefined in a parsed graph)
};

struct Node {
  OpId op{};
  std::vector<int> inputs;   // value ids; -1: an absent optional tensor
  std::vector<int> outputs;  // value ids
  OpAttrs attrs;             // the call's non-tensor arguments (attrs.tensors empty)
};

struct Value {
  TensorMeta meta;
  int node = -1;        // the defining node, -1 for a graph input
  int output_index = 0;
};

struct Graph {
  std::vector<Value> values;
  std::vector<GraphInput> inputs;
  std::vector<Node> nodes;
  std::vector<int> outputs;  // value ids, in the function's flattened output order

  int add_value(const TensorMeta& meta, int node = -1, int output_index = 0);
  // The text form (ir_text.cpp): one line per input, node and the outputs; parse_graph reads it back.
  std::string to_text() const;
};

Graph parse_graph(const std::string& text);  // throws ValueError naming the line

// Nodes whose effects outlive their outputs: in-place writes to existing storage, out= writes and
// random draws (the generator's state). Passes never remove or reorder them. An in-place op on a
// fresh buffer (input 0 absent) is pure.
bool has_side_effects(const Node& n);

// Removes nodes whose outputs nothing uses and that have no side effects, and renumbers the values
// densely (inputs first, then node outputs in order). Returns how many nodes it removed.
int eliminate_dead_code(Graph& g);

}  // namespace tessera::compiler
