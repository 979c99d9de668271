// The min-cut partition of a joint graph (DESIGN.md "The compiler"): which forward values the
// backward graph reads as saved, and which it recomputes from them.
//
// Note [Min-cut partition]
// The capture (Note [Joint graph] in capture.h) saves what eager autograd saves: every value a
// derivative reads. Many of those are cheap to make again from others that are saved anyway: the
// derivative of gelu(x W + b) @ W2 reads the gelu's output (for W2's gradient) and its input (for
// gelu's); keeping x W + b alone and recomputing gelu in the backward keeps half the bytes. As in
// PyTorch's min_cut_rematerialization_partition, the choice is a minimum s-t cut:
//   - vertices: per forward value v an edge v_in -> v_out of capacity "the bytes saving v keeps
//     alive" (storage_bytes: 0 for the graph's inputs, which the caller, the module or the graph
//     holds anyway, and for views of them; the storage's bytes otherwise; infinite for a view that
//     may be recomputed, since saving a view keeps its whole base); per forward node n a vertex N_n;
//   - edges of infinite capacity: N_n -> v_in for each output v of n, u_out -> N_n for each input u;
//     source -> v_in for each graph input; source -> N_n for each node that may not be recomputed
//     (recompute_rules.h: matmuls, convolutions, attention, fused linear ops, random draws, writes,
//     reductions to less than a quarter of their input, an op of the forward writing or reading a
//     tensor written later); v_out -> sink for each value the backward reads;
//   - a fused node's output that a cheap op remakes from another of its outputs (Note [Remade
//     outputs] in recompute_rules.h: the fused MLP's GELU) is made in the network by a vertex of that
//     op, reading the other output, instead of by the fused node.
// A finite cut crosses only v_in -> v_out edges: the values it crosses are saved, and a value the
// backward reads that is not saved is recomputed by its node (or remade), on the sink side, from
// inputs that are saved or recomputed in turn (the infinite edges make that closure hold). The maximum
// flow is Dinic's (max_flow.h); among the cuts of least bytes the partition takes the one whose sink
// side is smallest (the vertices that reach the sink in the residual graph), which recomputes the
// fewest nodes: for x W + b -> gelu -> @ W2 with a separate bias add, saving the matmul's output or
// the add's costs the same bytes, and the add's is saved (one node, gelu, recomputed rather than two).
// Figures (tests/compile/test_partition*.cpp; bytes of storage kept beyond the graph's inputs):
//   - that chain at (8, 16) x (16, 32): 1024 bytes, eager 2048; a float32 matmul whose bfloat16 cast
//     feeds the next matmul keeps the cast's 512 bytes, not the matmul's 1024 that recomputing would
//     keep; a dropout keeps its mask alone (512 of eager's 1028); the fused MLP keeps its
//     pre-activation and remakes the GELU (1024 of 2048);
//   - GPT-2 small (124M parameters, dropout 0.1) training step on (1, 8) tokens: 158,051,328 bytes,
//     eager 159,884,868; both hold the classifier's weight gradient that linear_cross_entropy makes in
//     the forward (154,389,504 bytes), so the activations are 3,661,824 against 5,495,364 (-33%). On
//     (4, 128) tokens: 459,525,120 against 612,393,156 (activations 305,135,616 against 458,003,652,
//     -33%). What stays: the matmul outputs (q, k, v as their contiguous copies, the attention
//     probabilities' softmax), the dropout masks, the residual branches after dropout, the fused MLP's
//     pre-activation; layer norms, their statistics, the GELUs and the dropouts' products are made
//     again in the backward (248 forward nodes at (4, 128)).
// The backward's own nodes all stay in the backward; only forward nodes are copied into it, each just
// before the first backward node that reads it (in forward order among themselves). The forward then
// returns the chosen values after the program's outputs, and dead code goes. A recomputed node runs
// the same op on the same inputs as in the forward, which on the CPU gives the same bits (so the
// compiled gradients stay equal to eager's bitwise; the fused MLP's GELU is computed on the CPU by the
// very gelu call that remakes it); on a device whose fused MLP kernel computes the GELU in its own
// epilogue, and with the codegen backend (a recomputed node may fuse differently in the backward than
// in the forward), the remade value may differ within float32 rounding. The partition declines (the
// graphs stay as captured) where the backward writes in place a tensor it reads as saved, or where
// the cut would keep more bytes than eager's saved values (two saved values over one storage count
// twice in the flow, once in storage_bytes).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "compile/graph.h"
#include "compile/recompute_rules.h"

namespace tessera::compiler {

struct PartitionDecision {
  std::vector<int> saved;       // forward values the backward reads, ascending (graph inputs included)
  std::vector<int> recomputed;  // forward nodes the backward runs again, ascending (program order)
  std::vector<RemadeOutput> remade;  // outputs of saved fused nodes the backward remakes (Note [Remade
                                     // outputs] in recompute_rules.h), in program order
  int64_t cut_bytes = 0;        // the minimum cut's capacity (the flow's value)
  int64_t saved_bytes = 0;      // saved_storage_bytes of `saved`: storage kept beyond the inputs
  int64_t eager_saved_bytes = 0;  // the same of the values the backward read as captured
  bool changed = false;         // whether the decision differs from the graphs as captured
  std::string declined;         // why the graphs stay as captured; empty when the cut decides
};

// Decides the saved values of the joint graph (`forward`, whose outputs are the program's
// `num_program_outputs` then the values the Saved inputs of `backward` read, by index).
PartitionDecision choose_saved_values(const Graph& forward, int num_program_outputs, const Graph& backward);

// Rewrites the pair by the decision: the forward returns the program's outputs then `saved`, the
// backward reads them as its Saved inputs 0.. and runs the recomputed nodes before their first use;
// dead code goes from both. Nothing changes when the decision is unchanged or declined.
void apply_partition(Graph& forward, int num_program_outputs, Graph& backward, const PartitionDecision& d);

// Both. The decision's value ids are the forward's before the rewrite (dead code renumbers them);
// the caller verifies the rewritten graphs (verify.h), as between any two passes.
PartitionDecision partition_joint_graph(Graph& forward, int num_program_outputs, Graph& backward);

}  // namespace tessera::compiler
