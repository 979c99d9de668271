// What the engine tells a node while it runs the node's apply(): whether the node's saved tensors
// will be released right after it (a backward without retain_graph). A node that can free its saved
// tensors as it goes (the compiled joint graph's backward: Note [Saved inputs released at their last
// use] in compile/executor.h) reads it; others need not.
#pragma once
#include <cstdint>

namespace tessera::autograd {

// True inside GraphNode::apply() when the engine releases the node's saved tensors after it (not in a
// batched backward, whose default apply_batched calls apply() once per sample).
bool releases_saved_after_apply();

// Note [Fake data] (runtime/fake_data.h): a count that grows each time user code is attached to the
// autograd graph: a tensor hook (retain_grad's too), a saved tensor packed by a hook, a custom
// function's node (module backward hooks are custom functions). The compiler does not trace a
// backward over fake data when this moved during the forward: that code would see fake gradients,
// and could keep them.
uint64_t user_code_epoch();
void note_user_code();

}  // namespace tessera::autograd
