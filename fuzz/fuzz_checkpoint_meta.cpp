// libFuzzer target for a checkpoint's metadata (checkpoint.json, src/models/checkpoint_meta.*): any
// text must either parse into checked fields or raise a tessera::Error (IOError naming the field); a
// JSON library exception escaping it, a crash or a sanitizer report is a bug. Seed:
// fuzz/corpus/checkpoint_meta.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "models/checkpoint_meta.h"
#include "tessera/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const tessera::detail::CheckpointMeta m =
        tessera::detail::parse_checkpoint_meta(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
    if (m.step < 0) std::abort();  // the parser promises a non-negative step
  } catch (const tessera::Error&) {
  }
  return 0;
}
