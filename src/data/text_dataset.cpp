// TextByteDataset: next-byte prediction windows over a file (see datasets.h for the window layout).
//
// The file's bytes are held once, as uint8; windows are cut on demand. get_batch builds the (B, T)
// byte offsets of a whole batch (window starts + arange(T)) and gathers x and y with one
// index_select each, so it equals stacking get() per window.
#include <string>

#include "data/gz_file.h"
#include "tessera/data/datasets.h"
#include "tessera/error.h"
#include "tessera/functions.h"

namespace tessera::data {

TextByteDataset::TextByteDataset(const std::string& path, int64_t block_size, std::optional<int64_t> stride)
    : block_size_(block_size), stride_(stride.value_or(block_size)) {
  TS_CHECK(block_size_ >= 1, ValueError, "TextByteDataset: block_size should be a positive integer, got ",
           block_size_);
  TS_CHECK(stride_ >= 1, ValueError, "TextByteDataset: stride should be a positive integer, got ", stride_);
  std::vector<uint8_t> data;
  {
    detail::GzReader in(path, "TextByteDataset");
    data = in.read_all();
  }
  const auto n = static_cast<int64_t>(data.size());
  TS_CHECK(n >= block_size_ + 1, ValueError, "TextByteDataset: '", path, "' holds ", n,
           " bytes, fewer than block_size + 1 = ", block_size_ + 1, " needed for one (x, y) window");
  bytes_ = from_blob(data.data(), {n}, kUInt8);
  size_ = (n - block_size_ - 1) / stride_ + 1;
}

Example TextByteDataset::get(int64_t index) const {
  const int64_t s = wrap_index(index, size_, "TextByteDataset") * stride_;
  return {bytes_.slice(0, s, s + block_size_).to(kInt64), bytes_.slice(0, s + 1, s + block_size_ + 1).to(kInt64)};
}

std::optional<Example> TextByteDataset::get_batch(const Tensor& indices) const {
  const int64_t b = indices.numel();
  // (B, T) byte offsets of x; y's are one further.
  const Tensor offsets = (indices.to(kInt64) * stride_).unsqueeze(1) + arange(block_size_, kInt64).unsqueeze(0);
  const Tensor flat = offsets.reshape({b * block_size_});
  return Example{bytes_.index_select(0, flat).to(kInt64).view({b, block_size_}),
                 bytes_.index_select(0, flat + 1).to(kInt64).view({b, block_size_})};
}

}  // namespace tessera::data
