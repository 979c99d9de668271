// Running one graph node: the op of the table called again with the node's inputs and attributes
// (the executor's eager backend, and the verifier on meta tensors).
//
// Each op the capture supports has a replay entry: how the tensors of its trace record map to the
// node (record inputs first, then the attrs.tensors that are inputs; record outputs first, then the
// attrs.tensors that are outputs, such as max's indices or layer norm's statistics), and the call
// that recomputes the outputs from the inputs through the public ops. An op without an entry cannot
// be captured: the capture refuses it by name (Note [Capture provenance] in capture.h). In-place
// nodes take the tensor they write as input 0 and return it.
#pragma once
#include <vector>

#include "compile/graph.h"

namespace tessera::compiler {

// The role of each attrs.tensors entry of a trace record.
enum class AttrTensor : uint8_t { Input, Output, Ignored };

struct OpReplay {
  // Roles of attrs.tensors by position; `all_inputs` when every entry is an input (index's list).
  std::vector<AttrTensor> attr_tensors;
  bool all_inputs = false;
  // Recomputes the node's outputs; `out` is the metadata of each output as captured (some calls take
  // a size or a dtype from it).
  std::vector<Tensor> (*run)(OpId op, const std::vector<Tensor>& in, const OpAttrs& attrs,
                             const std::vector<TensorMeta>& out);
};

// The replay entry of `op`, or nullptr where the capture does not support it.
const OpReplay* op_replay(OpId op);

// A tensor of the meta device with the layout of `m` (0-dim CPU scalars too): the verifier and the
// decompositions run ops on these, which compute metadata only.
Tensor meta_tensor(const TensorMeta& m);

// Runs node `n` of `g` on `inputs` (one per node input; undefined for an absent one).
std::vector<Tensor> run_node(const Graph& g, const Node& n, const std::vector<Tensor>& inputs);

}  // namespace tessera::compiler
