// The profiler's stage of the dispatcher (Note [Profiler recording] in profiler/recorder.h).
#pragma once

namespace tessera {

// Registers the switch with which the profiler adds and removes ops' recording observer. Called once
// at start-up.
void register_profiler_stage();

}  // namespace tessera
