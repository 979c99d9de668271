#include "io/safetensors_dtype.h"

namespace tessera {

const char* safetensors_dtype_code(DType t) {
  switch (t) {
    case DType::Bool: return "BOOL";
    case DType::UInt8: return "U8";
    case DType::Int8: return "I8";
    case DType::Int32: return "I32";
    case DType::Int64: return "I64";
    case DType::Float16: return "F16";
    case DType::BFloat16: return "BF16";
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
  }
  return "?";
}

std::optional<DType> dtype_from_safetensors_code(std::string_view c) {
  if (c == "BOOL") return DType::Bool;
  if (c == "U8") return DType::UInt8;
  if (c == "I8") return DType::Int8;
  if (c == "I32") return DType::Int32;
  if (c == "I64") return DType::Int64;
  if (c == "F16") return DType::Float16;
  if (c == "BF16") return DType::BFloat16;
  if (c == "F32") return DType::Float32;
  if (c == "F64") return DType::Float64;
  return std::nullopt;
}

}  // namespace tessera
