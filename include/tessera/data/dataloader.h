// DataLoader: batches of a Dataset, iterated with range-for, as torch.utils.data.DataLoader:
//
//   ts::data::DataLoader loader(train, {.batch_size = 128, .shuffle = true, .num_workers = 2});
//   for (int epoch = 0; epoch < 10; ++epoch)
//     for (auto& [x, y] : loader) { ... }          // loader.size() batches per epoch
//
// Note [DataLoader order]: each begin() starts one epoch. Without shuffle the samples come in index
// order. With shuffle, epoch e visits the samples in the order of
//     Generator g(seed); g.set_offset(e << 40); randperm(size, kInt64, &g)
// so the order depends on (seed, epoch) only: the same seed gives the same orders, each epoch a new one,
// and set_epoch(e) replays epoch e (as DistributedSampler.set_epoch does). The epoch counter starts at
// 0 and goes up by one at every begin(). Without options.seed the seed is drawn once, at construction,
// from the default CPU generator, so manual_seed() makes a program's shuffles reproducible.
//
// Note [DataLoader workers]: with num_workers = W > 0 each epoch starts W std::threads that build
// batches ahead of the consumer, at most W * prefetch_factor batches ahead (a bounded queue). A worker
// takes the next unclaimed batch index; the consumer receives batches strictly in index order, so the
// batches are the same whatever W is. An exception thrown while building batch k (in the dataset or the
// collate) is rethrown by the iterator when it reaches batch k. Destroying an iterator mid-epoch (a
// `break`) stops the workers and joins them; a worker busy with a batch finishes that batch first.
// Datasets and the collate are called from several threads at once: get(), get_batch() and a custom
// collate must be thread-safe.
#pragma once
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/data/dataset.h"

namespace tessera::data {

// Turns the examples of one batch into the batch.
using CollateFn = std::function<Example(std::vector<Example>)>;

// Stacks tensor j of every example along a new dim 0 (torch's default_collate for tensors): examples
// of sizes (C, H, W) make a batch (B, C, H, W); scalar labels make (B,). Every example must hold the
// same number of tensors, of the same sizes at each position (else ValueError / ShapeError).
Example default_collate(const std::vector<Example>& examples);

struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;
  int64_t num_workers = 0;           // 0: batches are built by the iterating thread
  bool drop_last = false;            // drop the last batch when it is smaller than batch_size
  bool pin_memory = false;           // batches in pinned host memory when a GPU is present (else a no-op)
  std::optional<uint64_t> seed = std::nullopt;  // shuffle seed; see Note [DataLoader order]
  int64_t prefetch_factor = 2;       // batches queued per worker
  CollateFn collate = nullptr;       // empty: default_collate (and Dataset::get_batch where offered)
};

namespace detail {
class EpochRun;
}

class DataLoader {
 public:
  struct Sentinel {};
  class Iterator;

  // Borrows an lvalue dataset (it must outlive the loader and its iterators); takes ownership of an
  // rvalue one (`DataLoader loader(TensorDataset{x, y}, ...)`).
  template <class D>
    requires std::derived_from<std::remove_cvref_t<D>, Dataset>
  DataLoader(D&& dataset, DataLoaderOptions options = {})  // NOLINT(bugprone-forwarding-reference-overload)
      : DataLoader(hold(std::forward<D>(dataset)), std::move(options)) {}
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});

  // Batches per epoch: ceil(size / batch_size), or floor with drop_last.
  int64_t size() const;
  const Dataset& dataset() const { return *dataset_; }
  const DataLoaderOptions& options() const { return options_; }
  uint64_t seed() const { return seed_; }
  // The epoch that the next begin() runs (Note [DataLoader order]).
  int64_t epoch() const { return epoch_; }
  void set_epoch(int64_t epoch);
  // The sample indices of epoch `epoch` in visiting order (1-D int64, all of them, before batching).
  Tensor indices(int64_t epoch) const;

  Iterator begin();  // starts the next epoch
  Sentinel end() const { return {}; }

 private:
  template <class D>
  static std::shared_ptr<const Dataset> hold(D&& dataset) {
    if constexpr (std::is_lvalue_reference_v<D>) {
      return std::shared_ptr<const Dataset>(std::shared_ptr<const Dataset>(), &dataset);  // not owned
    } else {
      return std::make_shared<std::remove_cvref_t<D>>(std::move(dataset));
    }
  }

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  uint64_t seed_ = 0;
  int64_t epoch_ = 0;
};

// An input iterator over one epoch's batches. Move-only: it owns the epoch's worker threads.
// *it is the current batch, a reference that stays valid until the iterator moves on.
class DataLoader::Iterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = Example;
  using difference_type = std::ptrdiff_t;
  using reference = Example&;
  using pointer = Example*;

  Iterator() noexcept;
  Iterator(Iterator&&) noexcept;
  Iterator& operator=(Iterator&&) noexcept;
  Iterator(const Iterator&) = delete;
  Iterator& operator=(const Iterator&) = delete;
  ~Iterator();

  Example& operator*() const;
  Example* operator->() const { return &**this; }
  Iterator& operator++();
  void operator++(int) { ++*this; }
  bool operator==(Sentinel) const { return position_ >= num_batches_; }
  int64_t batch_index() const { return position_; }

 private:
  friend class DataLoader;
  explicit Iterator(std::unique_ptr<detail::EpochRun> run);
  void load();

  std::unique_ptr<detail::EpochRun> run_;
  mutable Example current_;
  int64_t position_ = 0;
  int64_t num_batches_ = 0;
};

}  // namespace tessera::data
