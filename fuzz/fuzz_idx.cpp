// libFuzzer target for read_idx (src/data/idx.cpp), raw and gzip-compressed: any file must either give
// a tensor whose every element can be read or raise a tessera::Error (IOError for a malformed file);
// a crash, a sanitizer report, another exception or an allocation the file cannot back is a bug.
// Seed: fuzz/corpus/idx.
#include <cstddef>
#include <cstdint>

#include "fuzz_file.h"
#include "tessera/tessera.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = tessera::fuzz::scratch_file(data, size, ".idx");
  try {
    const tessera::Tensor t = tessera::data::read_idx(path);
    // Every byte of the result is touched, so that a short read past the data shows up under ASan.
    const auto* p = static_cast<const volatile uint8_t*>(t.data_ptr());
    uint8_t sink = 0;
    for (size_t i = 0; i < t.nbytes(); ++i) sink ^= p[i];
    (void)sink;
  } catch (const tessera::Error&) {
  }
  return 0;
}
