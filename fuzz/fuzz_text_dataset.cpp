// libFuzzer target for TextByteDataset (src/data/text_dataset.cpp): the first two bytes choose the
// block size and stride, the rest is the file (plain or gzip). The dataset must either open and give
// windows (the first, the last and a batch of both) whose bytes are the file's, or raise a
// tessera::Error; a crash or a sanitizer report is a bug. Seed: fuzz/corpus/text_dataset.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fuzz_file.h"
#include "tessera/tessera.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int64_t block = data[0] % 64;  // 0 is invalid on purpose
  const int64_t stride = data[1] % 16;
  const std::string& path = tessera::fuzz::scratch_file(data + 2, size - 2, ".txt");
  try {
    tessera::data::TextByteDataset ds(path, block, stride == 0 ? std::nullopt : std::optional<int64_t>(stride));
    const int64_t n = ds.size();
    if (n <= 0) std::abort();  // a dataset that opens has a window
    auto [x0, y0] = ds.get(0);
    auto [xl, yl] = ds.get(n - 1);
    if (x0.numel() != block || yl.numel() != block) std::abort();
    auto b = ds.get_batch(tessera::tensor(std::vector<int64_t>{0, n - 1}));
    if (!b || !tessera::equal((*b)[0][1], xl) || !tessera::equal((*b)[1][0], y0)) std::abort();
  } catch (const tessera::Error&) {
  }
  return 0;
}
