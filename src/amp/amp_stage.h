// Start-up registration of the amp layer (tessera_init.cpp calls it once).
#pragma once

namespace tessera::amp {

// Registers the autocast stage with the op layer (Note [Autocast stage], ops/autocast_hook.h).
void install_autocast_stage();

}  // namespace tessera::amp
