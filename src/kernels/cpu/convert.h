// Element conversion between tessera's C++ element types, as PyTorch's static_cast_with_inter_type:
// 16-bit floats go through float, anything to bool is `!= 0`.
#pragma once
#include "kernels/cpu/isa_namespace.h"
#include <type_traits>

#include "tensor/dispatch_dtype.h"

namespace tessera::cpu {
TS_CPU_ISA_BEGIN  // Note [ISA namespaces] in kernels/cpu/isa_namespace.h

template <class To, class From>
inline To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<acc_t<From>>(v) != acc_t<From>(0);
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(static_cast<acc_t<From>>(v)));
  } else {
    return static_cast<To>(static_cast<acc_t<From>>(v));
  }
}

TS_CPU_ISA_END
}  // namespace tessera::cpu
