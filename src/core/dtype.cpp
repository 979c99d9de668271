// DType properties and PyTorch's promotion table.
#include "tessera/dtype.h"

#include "tessera/error.h"

namespace tessera {

size_t element_size(DType t) {
  switch (t) {
    case DType::Bool: case DType::UInt8: case DType::Int8: return 1;
    case DType::Float16: case DType::BFloat16: return 2;
    case DType::Int32: case DType::Float32: return 4;
    case DType::Int64: case DType::Float64: return 8;
  }
  TS_THROW(DTypeError, "element_size: unknown dtype ", int(t));
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "unknown";
}

bool is_floating_point(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}

bool is_integral(DType t, bool include_bool) {
  switch (t) {
    case DType::Bool: return include_bool;
    case DType::UInt8: case DType::Int8: case DType::Int32: case DType::Int64: return true;
    default: return false;
  }
}

bool is_signed(DType t) { return t != DType::Bool && t != DType::UInt8; }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  const bool fa = is_floating_point(a), fb = is_floating_point(b);
  if (fa && fb) {
    // float16 with bfloat16 meets in float32; otherwise the wider one.
    if ((a == DType::Float16 && b == DType::BFloat16) || (a == DType::BFloat16 && b == DType::Float16)) return DType::Float32;
    return static_cast<uint8_t>(a) > static_cast<uint8_t>(b) ? a : b;
  }
  if (fa) return a;
  if (fb) return b;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  // uint8 with int8 is int16 in PyTorch; tessera has no int16, so they meet in int32.
  if ((a == DType::UInt8 && b == DType::Int8) || (a == DType::Int8 && b == DType::UInt8)) return DType::Int32;
  return static_cast<uint8_t>(a) > static_cast<uint8_t>(b) ? a : b;
}

DType acc_type(DType t) {
  switch (t) {
    case DType::Float16: case DType::BFloat16: case DType::Float32: return DType::Float32;
    case DType::Float64: return DType::Float64;
    default: return DType::Int64;
  }
}

bool can_cast(DType from, DType to) {
  if (is_floating_point(from) && !is_floating_point(to)) return false;
  if (from != DType::Bool && to == DType::Bool) return false;
  return true;
}

}  // namespace tessera
