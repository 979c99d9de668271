// Compile-time dispatch from a runtime DType to a C++ element type. Kernels write
//   dispatch_dtype(t.dtype(), "op", [&]<class T>(TypeTag<T>) { ... });
// Family variants restrict the set of types and raise DTypeError naming the op for the rest.
#pragma once
#include "tessera/dtype.h"
#include "tessera/error.h"

namespace tessera {

template <class T> struct TypeTag { using type = T; };

// Accumulation type of an element type: float for the 16-bit floats, the type itself otherwise.
template <class T> struct AccOf { using type = T; };
template <> struct AccOf<Half> { using type = float; };
template <> struct AccOf<BFloat16> { using type = float; };
template <class T> using acc_t = typename AccOf<T>::type;

enum class DTypeSet : uint16_t {
  Floating = (1 << int(DType::Float16)) | (1 << int(DType::BFloat16)) | (1 << int(DType::Float32)) | (1 << int(DType::Float64)),
  Integral = (1 << int(DType::UInt8)) | (1 << int(DType::Int8)) | (1 << int(DType::Int32)) | (1 << int(DType::Int64)),
  IntegralAndBool = (1 << int(DType::UInt8)) | (1 << int(DType::Int8)) | (1 << int(DType::Int32)) | (1 << int(DType::Int64)) | 1,
  AllNoBool = 0x1fe,
  All = 0x1ff,
};

[[noreturn]] void throw_unsupported_dtype(const char* op, DType t);

template <DTypeSet S = DTypeSet::All, class F>
decltype(auto) dispatch_dtype(DType t, const char* op, F&& f) {
  if (!((static_cast<uint16_t>(S) >> static_cast<int>(t)) & 1)) throw_unsupported_dtype(op, t);
  switch (t) {
    case DType::Bool: if constexpr ((static_cast<uint16_t>(S) >> int(DType::Bool)) & 1) return f(TypeTag<bool>{}); break;
    case DType::UInt8: if constexpr ((static_cast<uint16_t>(S) >> int(DType::UInt8)) & 1) return f(TypeTag<uint8_t>{}); break;
    case DType::Int8: if constexpr ((static_cast<uint16_t>(S) >> int(DType::Int8)) & 1) return f(TypeTag<int8_t>{}); break;
    case DType::Int32: if constexpr ((static_cast<uint16_t>(S) >> int(DType::Int32)) & 1) return f(TypeTag<int32_t>{}); break;
    case DType::Int64: if constexpr ((static_cast<uint16_t>(S) >> int(DType::Int64)) & 1) return f(TypeTag<int64_t>{}); break;
    case DType::Float16: if constexpr ((static_cast<uint16_t>(S) >> int(DType::Float16)) & 1) return f(TypeTag<Half>{}); break;
    case DType::BFloat16: if constexpr ((static_cast<uint16_t>(S) >> int(DType::BFloat16)) & 1) return f(TypeTag<BFloat16>{}); break;
    case DType::Float32: if constexpr ((static_cast<uint16_t>(S) >> int(DType::Float32)) & 1) return f(TypeTag<float>{}); break;
    case DType::Float64: if constexpr ((static_cast<uint16_t>(S) >> int(DType::Float64)) & 1) return f(TypeTag<double>{}); break;
  }
  throw_unsupported_dtype(op, t);
}

template <class F> decltype(auto) dispatch_floating(DType t, const char* op, F&& f) {
  return dispatch_dtype<DTypeSet::Floating>(t, op, std::forward<F>(f));
}

}  // namespace tessera
