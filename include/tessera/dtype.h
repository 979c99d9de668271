// Element types of tensors and PyTorch's promotion lattice between them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "tessera/half.h"

namespace tessera {

// The order is the promotion order within each category (see promote_types).
enum class DType : uint8_t { Bool, UInt8, Int8, Int32, Int64, Float16, BFloat16, Float32, Float64 };
inline constexpr int kNumDTypes = 9;

inline constexpr DType kBool = DType::Bool;
inline constexpr DType kUInt8 = DType::UInt8;
inline constexpr DType kInt8 = DType::Int8;
inline constexpr DType kInt32 = DType::Int32;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kFloat16 = DType::Float16;
inline constexpr DType kHalf = DType::Float16;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kDouble = DType::Float64;

size_t element_size(DType t);
const char* dtype_name(DType t);     // "float32", as PyTorch prints after "torch."
bool is_floating_point(DType t);
bool is_integral(DType t, bool include_bool = false);
bool is_signed(DType t);
// PyTorch's torch.promote_types: the smallest type both convert to without losing range or category.
DType promote_types(DType a, DType b);
// The dtype that accumulates a reduction or a float op on `t` (float32 for the 16-bit floats).
DType acc_type(DType t);
// Whether a value of `from` can be cast to `to` in place without narrowing category (PyTorch's
// can_cast: float -> int and int -> bool are refused for in-place and out= results).
bool can_cast(DType from, DType to);

// C++ type <-> DType.
template <class T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::Int8; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<Half> { static constexpr DType value = DType::Float16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <class T> inline constexpr DType dtype_of_v = dtype_of<T>::value;

}  // namespace tessera
