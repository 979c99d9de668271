// MNIST and Fashion-MNIST: four IDX files in one directory, raw or gzip-compressed.
//
// The images stay uint8 in memory (47 MB for the training split, not 188 MB as float32) and are
// scaled to float32 per example or per batch; get() and get_batch() apply the same to_float, so a
// batch built either way holds the same values, bit for bit.
#include <filesystem>
#include <string>

#include "tessera/data/datasets.h"
#include "tessera/error.h"
#include "tessera/functions.h"

namespace tessera::data {
namespace {

constexpr const char* kMnistHowToGet =
    "download MNIST's train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and "
    "t10k-labels-idx1-ubyte.gz into one directory and pass that directory";
constexpr const char* kFashionHowToGet =
    "install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or pass the directory holding "
    "train-images-idx3-ubyte (or train-images-idx3-ubyte.gz) and the other Fashion-MNIST files";

// <root>/<stem>, else <root>/<stem>.gz.
std::string find_file(const std::string& root, const std::string& stem, const char* name, const char* how_to_get) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path raw = fs::path(root) / stem;
  if (fs::is_regular_file(raw, ec)) return raw.string();
  const fs::path gz = fs::path(root) / (stem + ".gz");
  if (fs::is_regular_file(gz, ec)) return gz.string();
  TS_THROW(IOError, name, ": cannot find ", stem, " or ", stem, ".gz in '", root, "' (looked for '", raw.string(),
           "' and '", gz.string(), "'); to get the data, ", how_to_get);
}

Tensor read_checked(const std::string& path, const char* name, const char* how_to_get) {
  try {
    return read_idx(path);
  } catch (const IOError& e) {
    TS_THROW(IOError, name, ": ", e.what(), "; to get a good copy, ", how_to_get);
  }
}

}  // namespace

MNIST::MNIST(const std::string& root, Split split, std::optional<Normalize> normalize)
    : MNIST(root, split, normalize, "MNIST", kMnistHowToGet) {}

FashionMNIST::FashionMNIST(const std::string& root, Split split, std::optional<Normalize> normalize)
    : MNIST(root, split, normalize, "FashionMNIST", kFashionHowToGet) {}

MNIST::MNIST(const std::string& root, Split split, std::optional<Normalize> normalize, const char* name,
             const char* how_to_get)
    : normalize_(normalize), name_(name) {
  if (normalize_) {
    TS_CHECK(normalize_->std > 0, ValueError, name, ": Normalize std must be positive, got ", normalize_->std);
  }
  const std::string prefix = split == Split::Train ? "train" : "t10k";
  const std::string images_path = find_file(root, prefix + "-images-idx3-ubyte", name, how_to_get);
  const std::string labels_path = find_file(root, prefix + "-labels-idx1-ubyte", name, how_to_get);
  const Tensor images = read_checked(images_path, name, how_to_get);
  const Tensor labels = read_checked(labels_path, name, how_to_get);
  TS_CHECK(images.dtype() == kUInt8 && images.dim() == 3, IOError, name, ": '", images_path, "' holds a ",
           dtype_name(images.dtype()), " tensor of sizes ", images.sizes(),
           ", expected uint8 images (N, rows, cols); to get a good copy, ", how_to_get);
  TS_CHECK(labels.dtype() == kUInt8 && labels.dim() == 1, IOError, name, ": '", labels_path, "' holds a ",
           dtype_name(labels.dtype()), " tensor of sizes ", labels.sizes(),
           ", expected uint8 labels (N,); to get a good copy, ", how_to_get);
  TS_CHECK(images.size(0) == labels.size(0), IOError, name, ": '", images_path, "' holds ", images.size(0),
           " images but '", labels_path, "' holds ", labels.size(0), " labels; to get a good copy, ", how_to_get);
  images_u8_ = images.unsqueeze(1);  // (N, 1, H, W)
  labels_ = labels.to(kInt64);
}

Tensor MNIST::to_float(const Tensor& u8) const {
  Tensor x = u8.to(kFloat32).div_(255.0);
  if (normalize_) x.sub_(normalize_->mean).div_(normalize_->std);
  return x;
}

Tensor MNIST::images() const { return to_float(images_u8_); }

Example MNIST::get(int64_t index) const {
  const int64_t i = wrap_index(index, size(), name_);
  return {to_float(images_u8_.select(0, i)), labels_.select(0, i)};
}

std::optional<Example> MNIST::get_batch(const Tensor& indices) const {
  return Example{to_float(images_u8_.index_select(0, indices)), labels_.index_select(0, indices)};
}

}  // namespace tessera::data
