// The two words of dispatch state that a kernel slot reads (Note [Scoped kernels], ops/op_scope.h):
// how many stages are installed, and how deep in OpScopes this thread is. Kept apart from op_scope.h
// so that kernels, which include kernel_slot.h, do not depend on the op table.
#pragma once
#include <atomic>

namespace tessera::detail {
extern std::atomic<int> g_num_op_stages;  // observers plus the tracer
extern thread_local int t_op_depth;
void notify_unscoped_kernel(const char* kernel);
inline bool op_stages_installed() { return g_num_op_stages.load(std::memory_order_relaxed) > 0; }
}  // namespace tessera::detail
