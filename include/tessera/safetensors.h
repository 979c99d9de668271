// safetensors (the format of Hugging Face and PyTorch checkpoints): an 8-byte little-endian header
// length N, N bytes of JSON {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
// {str: str}}, then the tensor bytes. Reading validates the file as the reference implementation
// does and raises IOError naming the file and the rule it breaks.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/tensor.h"

namespace tessera {

class SafetensorsFile {
 public:
  // Memory-maps and validates `path`. Tensors returned by get() view the mapping (no copy) when
  // their offset is aligned to their element size, and are copies otherwise; they stay valid after
  // this object is gone.
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  std::vector<std::string> keys() const;  // in file order of their data offsets
  bool contains(const std::string& name) const;
  Tensor get(const std::string& name) const;  // raises IndexError for unknown names
  const std::map<std::string, std::string>& metadata() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// All tensors of a file, by name.
std::map<std::string, Tensor> load_safetensors(const std::string& path);
// Writes tensors (any device, any layout; copied to contiguous CPU memory) and optional string
// metadata. Names are written sorted, data laid out in that order, header padded to 8 bytes.
void save_safetensors(const std::map<std::string, Tensor>& tensors, const std::string& path,
                      const std::map<std::string, std::string>& metadata = {});
// The same, into memory, and reading from memory (used by the fuzzer and the tests).
std::string serialize_safetensors(const std::map<std::string, Tensor>& tensors,
                                  const std::map<std::string, std::string>& metadata = {});
std::map<std::string, Tensor> deserialize_safetensors(const std::string& bytes, const std::string& name = "<memory>");

}  // namespace tessera
