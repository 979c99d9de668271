// Internals shared by the safetensors reader and writer: the parsed, validated form of a header and
// the helpers both sides need. Invariants of a ParsedHeader (checked by parse_safetensors_header):
// entries are sorted by data offsets and tile [0, data_size) exactly, each entry's byte size equals
// numel * element size, and data_start + data_size == the size of the buffer that was parsed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/storage.h"
#include "tessera/dtype.h"
#include "tessera/shape.h"
#include "tessera/tensor.h"

namespace tessera::io {

// The reference implementation refuses headers above 100 MB: a larger one is a corrupt or hostile file.
inline constexpr uint64_t kMaxHeaderSize = 100'000'000;
inline constexpr const char* kMetadataKey = "__metadata__";

struct TensorEntry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0;  // byte offsets into the data section, begin <= end
  uint64_t end = 0;
};

struct ParsedHeader {
  std::vector<TensorEntry> entries;  // sorted by (begin, end, name)
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // 8 + header length: where the data section begins in the buffer
};

// Parses and validates a whole safetensors buffer (header and the data section's extent; not the
// tensor bytes). `source` names the buffer in errors: a path, or "<memory>". Raises IOError naming
// `source` and the rule the buffer breaks.
ParsedHeader parse_safetensors_header(const unsigned char* data, size_t size, const std::string& source);

// A tensor for `entry` over `storage`, which holds the whole buffer that was parsed (data_start
// included). A view when the entry's absolute byte offset is a multiple of its element size (and,
// for bool, every byte is 0 or 1); a copy otherwise.
Tensor tensor_from_buffer(const std::shared_ptr<Storage>& storage, const TensorEntry& entry, uint64_t data_start);

// Strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF), as Rust's str::from_utf8.
bool is_valid_utf8(std::string_view s);

}  // namespace tessera::io
