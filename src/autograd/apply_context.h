// What the engine tells a node while it runs the node's apply(): whether the node's saved tensors
// will be released right after it (a backward without retain_graph). A node that can free its saved
// tensors as it goes (the compiled joint graph's backward: Note [Saved inputs released at their last
// use] in compile/executor.h) reads it; others need not.
#pragma once

namespace tessera::autograd {

// True inside GraphNode::apply() when the engine releases the node's saved tensors after it.
bool releases_saved_after_apply();

}  // namespace tessera::autograd
