// libFuzzer target for the gzip reader (src/data/gz_file.*): any file, gzip or plain, must read to its
// end (in odd-sized chunks and whole) or raise a tessera::Error (IOError for a damaged stream); the two
// ways of reading must agree. Seed: fuzz/corpus/gzip.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "data/gz_file.h"
#include "fuzz_file.h"
#include "tessera/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = tessera::fuzz::scratch_file(data, size, ".gz");
  std::vector<uint8_t> whole, chunked;
  bool whole_ok = false, chunked_ok = false;
  try {
    tessera::data::detail::GzReader in(path, "fuzz_gzip");
    whole = in.read_all();
    whole_ok = true;
  } catch (const tessera::Error&) {
  }
  try {
    tessera::data::detail::GzReader in(path, "fuzz_gzip");
    uint8_t buf[777];
    for (;;) {
      const size_t got = in.read(buf, sizeof buf);
      chunked.insert(chunked.end(), buf, buf + got);
      if (got < sizeof buf) break;
    }
    chunked_ok = true;
  } catch (const tessera::Error&) {
  }
  // One reader, two ways of calling it: the same bytes or the same verdict.
  if (whole_ok != chunked_ok || (whole_ok && whole != chunked)) std::abort();
  return 0;
}
