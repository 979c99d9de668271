// apps/text_data.h: the byte-level text dataset of the GPT training command.
#include "text_data.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include "tessera/error.h"
#include "tessera/functions.h"

namespace tessera::app {

TextBytes::TextBytes(std::string bytes, double train_fraction) : bytes_(std::move(bytes)) {
  TS_CHECK(train_fraction > 0 && train_fraction < 1, ValueError, "text data: the train fraction must be in (0, 1), got ",
           train_fraction);
  TS_CHECK(!bytes_.empty(), ValueError, "text data: the text is empty");
  split_ = static_cast<int64_t>(std::floor(static_cast<double>(bytes_.size()) * train_fraction));
}

TextBytes TextBytes::from_file(const std::string& path, double train_fraction) {
  std::ifstream in(path, std::ios::binary);
  TS_CHECK(in.good(), IOError, "text data: cannot open '", path, "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  TS_CHECK(!in.bad(), IOError, "text data: cannot read '", path, "'");
  std::string bytes = ss.str();
  TS_CHECK(!bytes.empty(), ValueError, "text data: '", path, "' is empty");
  return TextBytes(std::move(bytes), train_fraction);
}

void TextBytes::check_context(int64_t context) const {
  TS_CHECK(context > 0, ValueError, "text data: the context must be positive, got ", context);
  TS_CHECK(train_size() > context && val_size() > context, ValueError, "text data: ", size(),
           " bytes split into ", train_size(), " for training and ", val_size(),
           " for validation; each part needs at least context + 1 = ", context + 1, " bytes");
}

std::pair<Tensor, Tensor> TextBytes::batch(bool val, int64_t batch_size, int64_t context, Generator& gen) const {
  TS_CHECK(batch_size > 0, ValueError, "text data: the batch size must be positive, got ", batch_size);
  check_context(context);
  const int64_t begin = val ? split_ : 0;
  const int64_t n = val ? val_size() : train_size();
  // Offsets in [0, n - context - 1]: the last target, offset + context, stays inside the part.
  Tensor offsets = randint(0, n - context, {batch_size}, TensorOptions(kInt64), &gen);
  const int64_t* off = offsets.data_ptr<int64_t>();
  std::vector<int64_t> x(static_cast<size_t>(batch_size * context)), y(x.size());
  const auto* src = reinterpret_cast<const unsigned char*>(bytes_.data()) + begin;
  for (int64_t b = 0; b < batch_size; ++b) {
    for (int64_t t = 0; t < context; ++t) {
      x[static_cast<size_t>(b * context + t)] = src[off[b] + t];
      y[static_cast<size_t>(b * context + t)] = src[off[b] + t + 1];
    }
  }
  return {tensor(x, {batch_size, context}), tensor(y, {batch_size, context})};
}

std::string decode_bytes(const Tensor& tokens) {
  Tensor t = tokens.cpu().to(kCPU, kInt64).contiguous().reshape({-1});
  const int64_t* p = t.data_ptr<int64_t>();
  std::string out(static_cast<size_t>(t.numel()), '\0');
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = static_cast<char>(p[i] & 0xff);
  return out;
}

}  // namespace tessera::app
