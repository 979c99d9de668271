// The determinism switch inside the library (tessera/determinism.h): kernels with a faster
// order-dependent variant ask is_deterministic() to choose.
#pragma once
#include "tessera/determinism.h"
