// File readers and the datasets built on them: the IDX format of MNIST and Fashion-MNIST (raw or
// gzip-compressed), the MNIST / FashionMNIST datasets, and a byte-level text dataset for language
// models.
//
// Every reader raises tessera::IOError for a missing or corrupt file (bad magic number, truncated data,
// dims that disagree with the amount of data, gzip errors), with a message that names the file; the
// datasets add how to get the data.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "tessera/data/dataset.h"

namespace tessera::data {

// ---- IDX ------------------------------------------------------------------------------------------
// An IDX file: a 4-byte magic number 0x0000TTNN (TT the element type, NN the number of dims), NN
// big-endian uint32 dims, then the elements row-major, big-endian. Types: 0x08 uint8, 0x09 int8,
// 0x0B int16 (read widened to int32: tessera has no int16), 0x0C int32, 0x0D float32, 0x0E float64.
// A gzip-compressed file (as MNIST is distributed, *.gz) is decompressed on the fly; the format is
// recognized by content, not by name.
Tensor read_idx(const std::string& path);
// Writes `t` (uint8, int8, int32, float32 or float64; any device and layout) as an IDX file,
// gzip-compressed when `path` ends in ".gz".
void write_idx(const std::string& path, const Tensor& t);

// ---- MNIST, Fashion-MNIST ----------------------------------------------------------------------------
enum class Split { Train, Test };

// x -> (x - mean) / std, applied after scaling pixels to [0, 1].
struct Normalize {
  double mean = 0.0;
  double std = 1.0;
};

// The MNIST layout: <root>/train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
// t10k-labels-idx1-ubyte, each raw or with ".gz" appended (the raw file is preferred when both exist).
// Example i is (image (1, 28, 28) float32 in [0, 1], label int64 scalar); the whole split is held in
// memory as uint8 and converted per example or per batch, so get_batch gathers a batch with one
// index_select.
class MNIST : public Dataset {
 public:
  static constexpr Normalize kNormalize{0.1307, 0.3081};  // the training set's pixel mean and std

  explicit MNIST(const std::string& root, Split split = Split::Train,
                 std::optional<Normalize> normalize = std::nullopt);
  int64_t size() const override { return labels_.size(0); }
  Example get(int64_t index) const override;
  std::optional<Example> get_batch(const Tensor& indices) const override;

  Tensor images() const;                                  // (N, 1, 28, 28) float32, normalized if asked
  const Tensor& labels() const { return labels_; }        // (N,) int64
  const Tensor& raw_images() const { return images_u8_; }  // (N, 1, 28, 28) uint8, as in the file

 protected:
  // `name` prefixes error messages; `how_to_get` is appended to them for a missing or corrupt file.
  MNIST(const std::string& root, Split split, std::optional<Normalize> normalize, const char* name,
        const char* how_to_get);

 private:
  Tensor to_float(const Tensor& u8) const;

  Tensor images_u8_;  // (N, 1, H, W) uint8
  Tensor labels_;     // (N,) int64
  std::optional<Normalize> normalize_;
  const char* name_;
};

// Zalando's Fashion-MNIST, in MNIST's layout. Debian's package dataset-fashion-mnist installs it at
// kDefaultRoot.
class FashionMNIST : public MNIST {
 public:
  static constexpr const char* kDefaultRoot = "/usr/share/datasets/fashion-mnist";
  static constexpr Normalize kNormalize{0.2860, 0.3530};

  explicit FashionMNIST(const std::string& root = kDefaultRoot, Split split = Split::Train,
                        std::optional<Normalize> normalize = std::nullopt);
};

// ---- text ---------------------------------------------------------------------------------------------
// A file read as a stream of bytes (tokens 0..255; a gzip-compressed file is decompressed), cut into
// windows of block_size tokens that start every `stride` bytes (stride = block_size: windows do not
// overlap; 1: every offset). Example i is (x, y), both (block_size,) int64 with
// x = bytes[s, s + block_size) and y = bytes[s + 1, s + block_size + 1), s = i * stride: y is x shifted
// by one, the next-token targets. Windows that would run past the end are not produced, so
// size() = (num_bytes - block_size - 1) / stride + 1; a file shorter than block_size + 1 bytes raises
// ValueError.
class TextByteDataset : public Dataset {
 public:
  static constexpr int64_t kVocabSize = 256;

  TextByteDataset(const std::string& path, int64_t block_size, std::optional<int64_t> stride = std::nullopt);
  int64_t size() const override { return size_; }
  Example get(int64_t index) const override;
  std::optional<Example> get_batch(const Tensor& indices) const override;

  const Tensor& bytes() const { return bytes_; }  // (num_bytes,) uint8
  int64_t block_size() const { return block_size_; }
  int64_t stride() const { return stride_; }

 private:
  Tensor bytes_;
  int64_t block_size_;
  int64_t stride_;
  int64_t size_;
};

}  // namespace tessera::data
