// Registration entry points of the CPU kernel families. Each family file defines its register_*()
// and fills the slots of ops/<family>_kernel.h for DeviceType::CPU.
#pragma once

namespace tessera::cpu {

void register_copy();
void register_threads();
void register_cpu_kernels();  // all of the above; called once at library start-up

}  // namespace tessera::cpu
