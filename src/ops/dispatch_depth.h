// The two words of dispatch state that a kernel slot reads (Note [Scoped kernels], ops/op_scope.h):
// how many stages are installed, and how deep in OpScopes this thread is. Kept apart from op_scope.h
// so that kernels, which include kernel_slot.h, do not depend on the op table.
#pragma once
#include <atomic>

namespace tessera::detail {
extern std::atomic<int> g_num_op_stages;  // observers plus the tracer
extern thread_local int t_op_depth;
// Note [Trace records] (ops/trace_hook.h): true on the thread whose program the compiler captures;
// t_trace_suppress counts the NoRecordScopes open on it (the bodies of ops that record themselves).
extern thread_local bool t_capturing;
extern thread_local int t_trace_suppress;
// A kernel slot ran while a stage is installed: reported as unscoped at depth 0 (Note [Scoped
// kernels]), and to the capture while this thread is captured.
void notify_kernel_slot(const char* kernel);
inline bool op_stages_installed() { return g_num_op_stages.load(std::memory_order_relaxed) > 0; }
}  // namespace tessera::detail
