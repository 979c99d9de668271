// Example, the Dataset base, TensorDataset and the default collate.
//
// The default collate and TensorDataset::get_batch must give identical batches (same sizes, dtypes and
// values): the DataLoader takes the second as a fast path for the first (index_select of whole rows
// instead of stacking one view per example), and a test holds them equal.
#include <string>

#include "tessera/data/dataloader.h"
#include "tessera/data/dataset.h"
#include "tessera/error.h"
#include "tessera/functions.h"

namespace tessera::data {

Tensor& Example::operator[](size_t i) {
  TS_CHECK(i < tensors_.size(), IndexError, "Example: index ", i, " is out of range for an example of ",
           tensors_.size(), " tensors");
  return tensors_[i];
}

const Tensor& Example::operator[](size_t i) const {
  TS_CHECK(i < tensors_.size(), IndexError, "Example: index ", i, " is out of range for an example of ",
           tensors_.size(), " tensors");
  return tensors_[i];
}

void Example::check_pair() const {
  TS_CHECK(tensors_.size() == 2, ValueError, "Example: `auto [x, y] = example` unpacks exactly 2 tensors, but this ",
           "example holds ", tensors_.size(), "; index it with example[i] instead");
}

std::optional<Example> Dataset::get_batch(const Tensor& /*indices*/) const { return std::nullopt; }

int64_t wrap_index(int64_t index, int64_t size, const char* dataset) {
  TS_CHECK(index >= -size && index < size, IndexError, dataset, ": index ", index,
           " is out of range for a dataset of size ", size);
  return index < 0 ? index + size : index;
}

// ---- TensorDataset ------------------------------------------------------------------------------

TensorDataset::TensorDataset(std::vector<Tensor> tensors) : tensors_(std::move(tensors)) {
  TS_CHECK(!tensors_.empty(), ValueError, "TensorDataset: expected at least one tensor");
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    TS_CHECK(t.defined(), ValueError, "TensorDataset: tensor ", i, " is undefined");
    TS_CHECK(t.dim() >= 1, ShapeError, "TensorDataset: tensor ", i,
             " is 0-dimensional; every tensor needs a first dimension to index examples by");
    TS_CHECK(t.size(0) == tensors_[0].size(0), ShapeError,
             "TensorDataset: size mismatch between tensors: tensor 0 has ", tensors_[0].size(0),
             " rows (size of dim 0) but tensor ", i, " has ", t.size(0));
  }
  size_ = tensors_[0].size(0);
}

Example TensorDataset::get(int64_t index) const {
  const int64_t i = wrap_index(index, size_, "TensorDataset");
  Example ex;
  for (const Tensor& t : tensors_) ex.push_back(t.select(0, i));
  return ex;
}

std::optional<Example> TensorDataset::get_batch(const Tensor& indices) const {
  Example batch;
  // index_select copies, so the batch never aliases the dataset, as a stacked batch does not.
  for (const Tensor& t : tensors_) batch.push_back(t.index_select(0, indices.to(t.device())));
  return batch;
}

// ---- default collate --------------------------------------------------------------------------

Example default_collate(const std::vector<Example>& examples) {
  TS_CHECK(!examples.empty(), ValueError, "default_collate: expected at least one example");
  const size_t n = examples[0].size();
  for (size_t i = 1; i < examples.size(); ++i) {
    TS_CHECK(examples[i].size() == n, ValueError, "default_collate: example ", i, " of the batch holds ",
             examples[i].size(), " tensors but example 0 holds ", n);
  }
  Example batch;
  std::vector<Tensor> column(examples.size());
  for (size_t j = 0; j < n; ++j) {
    for (size_t i = 0; i < examples.size(); ++i) {
      const Tensor& t = examples[i][j];
      TS_CHECK(t.defined(), ValueError, "default_collate: tensor ", j, " of example ", i, " is undefined");
      TS_CHECK(t.sizes() == examples[0][j].sizes(), ShapeError, "default_collate: cannot stack tensor ", j,
               " of the examples: example ", i, " has sizes ", t.sizes(), " but example 0 has ",
               examples[0][j].sizes(), "; pad them or pass a custom collate");
      column[i] = t;
    }
    batch.push_back(stack(column, 0));
  }
  return batch;
}

}  // namespace tessera::data
