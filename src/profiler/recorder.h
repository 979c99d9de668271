// The profiler's recording API, used by the layers that produce events: ops (through its observer,
// ops/profiler_observer.cpp), record_function, and the allocators' memory reports.
//
// Note [Profiler recording]
// The profiler is below ops in the layering (it may see only core and runtime), so it does not observe
// ops itself. Instead:
//  * ops registers, at start-up, a switch (set_op_observer_switch) that adds or removes its
//    OpObserver; the profiler turns it on while a profile runs or an emit_nvtx scope is alive, and off
//    after. With no observer the only cost of an op is OpScope's relaxed load of the observer count;
//    record_function's is one relaxed load of g_flags.
//  * The observer calls range_begin / range_end. Each thread keeps its own stack of open ranges (no
//    lock on begin; one lock on end to append the finished event), so nested ops (composite ops calling
//    ops, backward) nest; an event's parent is the range open below it on the same thread, and its self
//    time is its duration minus its children's.
//  * A range carries what was switched on when it began (recorded, NVTX pushed, GPU correlation
//    pushed) and undoes exactly that when it ends, so a scope that straddles a start or stop stays
//    balanced. Ranges of an earlier profile left open on a thread are dropped when the thread next
//    records (each stack remembers the session it belongs to). An exit that arrives with no range open
//    (an op entered before the observer was added) is ignored: such ops are always the outermost.
//  * While the CUDA activity is on, range_begin pushes the event's id as CUPTI's external correlation
//    id and range_end pops it, so every kernel launched inside the innermost open range is linked to it.
//  * OpEvent's inputs are read only at on_enter (they point into the op's argument list).
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/profiler.h"

namespace tessera::profiler::detail {

enum : uint32_t { kFlagRecord = 1, kFlagShapes = 2, kFlagNvtx = 4, kFlagGpu = 8 };
extern std::atomic<uint32_t> g_flags;

inline bool recording_on() { return g_flags.load(std::memory_order_relaxed) != 0; }
inline bool record_shapes_on() { return (g_flags.load(std::memory_order_relaxed) & kFlagShapes) != 0; }

// `shapes` and `dtypes` (may be empty) are moved from.
void range_begin(std::string_view name, EventKind kind, std::vector<std::vector<int64_t>>* shapes = nullptr,
                 std::vector<std::string>* dtypes = nullptr);
void range_end();

// Registered by ops at start-up: adds (true) or removes (false) its op observer.
using ObserverSwitch = void (*)(bool on);
void set_op_observer_switch(ObserverSwitch s);

// The live session (profiler/recorder.cpp).
struct SessionResult {
  std::vector<Event> events;          // CPU events by start, then GPU events by start; times absolute
  std::vector<MemoryEvent> memory;    // times absolute
  int64_t start_ns = 0, stop_ns = 0;  // steady clock
  bool with_cuda = false;             // the CUDA activity ran
};
// ValueError when a session is already running.
void start_session(const ProfileOptions& options);
SessionResult stop_session();
void nvtx_scope_enter();
void nvtx_scope_exit();

int64_t now_ns();  // steady clock

}  // namespace tessera::profiler::detail
