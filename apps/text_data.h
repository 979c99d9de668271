// The byte-level text data of `tessera train --model gpt2 --data text:FILE`: the file's bytes (vocabulary
// 256, token = byte), the first 90% for training and the last 10% for validation, and batches of random
// windows drawn from a seeded generator (nanoGPT's get_batch).
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "tessera/generator.h"
#include "tessera/tensor.h"

namespace tessera::app {

class TextBytes {
 public:
  // bytes split at floor(size * train_fraction); ValueError for a fraction outside (0, 1).
  explicit TextBytes(std::string bytes, double train_fraction = 0.9);
  // IOError when the file cannot be read; ValueError when it is empty.
  static TextBytes from_file(const std::string& path, double train_fraction = 0.9);

  int64_t size() const { return static_cast<int64_t>(bytes_.size()); }
  int64_t train_size() const { return split_; }
  int64_t val_size() const { return size() - split_; }
  const std::string& bytes() const { return bytes_; }

  // (x, y), both (batch, context) int64 on the CPU: B windows of the train (val = false) or validation
  // part, each starting at an offset drawn uniformly from [0, part_size - context - 1] by `gen`;
  // y[b, t] = x[b, t + 1] (the next byte). ValueError when the part is shorter than context + 1 bytes.
  std::pair<Tensor, Tensor> batch(bool val, int64_t batch_size, int64_t context, Generator& gen) const;

  // Checks that both parts hold at least context + 1 bytes (ValueError naming the sizes otherwise).
  void check_context(int64_t context) const;

 private:
  std::string bytes_;
  int64_t split_;
};

// Bytes (token ids 0..255) as text; the bytes of a multi-byte UTF-8 character that the model splits
// wrongly come out as they are.
std::string decode_bytes(const Tensor& tokens);

}  // namespace tessera::app
