// libFuzzer target for the safetensors reader: any byte string must either parse or raise a
// tessera::Error (IOError for a malformed buffer); a crash, a sanitizer report or any other exception
// is a bug. Accepted tensors are read in full, so that a view reaching past the buffer shows up
// under AddressSanitizer. Seed it with tests/io/corpus.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tessera/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto tensors = tessera::deserialize_safetensors(std::string(reinterpret_cast<const char*>(data), size));
    for (const auto& [name, t] : tensors) {
      // Capped: a valid file may describe a large tensor; reading a bounded prefix is enough to
      // touch the first and, through a flat view, the last byte the header claims.
      if (t.numel() <= (1 << 16)) (void)t.tolist<double>();
    }
    // A successful parse must round-trip to a buffer that parses again.
    if (size <= (1 << 20)) tessera::deserialize_safetensors(tessera::serialize_safetensors(tensors));
  } catch (const tessera::Error&) {
  }
  return 0;
}
