// Everything a tessera user needs: `#include <tessera/tessera.h>` and `namespace ts = tessera;`.
#pragma once
#include "tessera/autograd.h"
#include "tessera/device.h"
#include "tessera/dtype.h"
#include "tessera/error.h"
#include "tessera/functions.h"
#include "tessera/generator.h"
#include "tessera/optim.h"
#include "tessera/scalar.h"
#include "tessera/shape.h"
#include "tessera/tensor.h"
#include "tessera/safetensors.h"
