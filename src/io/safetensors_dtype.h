// The dtype codes of the safetensors format ("F32", "BF16", "I64", "BOOL", ...).
#pragma once
#include <optional>
#include <string_view>

#include "tessera/dtype.h"

namespace tessera {

const char* safetensors_dtype_code(DType t);
std::optional<DType> dtype_from_safetensors_code(std::string_view code);

}  // namespace tessera
