// DataLoader and its iterator: option checks, the per-epoch sample order (Note [DataLoader order] in
// tessera/data/dataloader.h) and the range-for protocol over an EpochRun.
//
// Invariant: an Iterator at position p < num_batches_ holds batch p in current_ (or an empty Example
// if building batch p threw); at position num_batches_ it has released its EpochRun, so the workers
// are joined as soon as the last batch is taken, not only when the iterator dies.
#include <utility>

#include "data/epoch_run.h"
#include "tessera/cuda.h"
#include "tessera/data/dataloader.h"
#include "tessera/error.h"
#include "tessera/functions.h"
#include "tessera/generator.h"

namespace tessera::data {
namespace {

// Each epoch's permutation starts 2^40 Philox counters after the previous one's, which leaves room
// for datasets of up to 2^41 samples (randperm takes one counter per two samples) without overlap.
constexpr int kEpochOffsetShift = 40;

}  // namespace

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  TS_CHECK(dataset_ != nullptr, ValueError, "DataLoader: the dataset is null");
  TS_CHECK(options_.batch_size >= 1, ValueError, "DataLoader: batch_size should be a positive integer, but got ",
           "batch_size=", options_.batch_size);
  TS_CHECK(options_.num_workers >= 0, ValueError, "DataLoader: num_workers option should be non-negative, but got ",
           "num_workers=", options_.num_workers);
  TS_CHECK(options_.prefetch_factor >= 1, ValueError, "DataLoader: prefetch_factor should be a positive integer, ",
           "but got prefetch_factor=", options_.prefetch_factor);
  TS_CHECK(dataset_->size() >= 0, ValueError, "DataLoader: the dataset reports a negative size (",
           dataset_->size(), ")");
  if (options_.seed) {
    seed_ = *options_.seed;
  } else {
    // As PyTorch draws a base seed from the default generator: manual_seed() fixes the shuffles.
    const Tensor draw = randint(0, int64_t{1} << 62, {}, kInt64, &default_generator(kCPU));
    seed_ = static_cast<uint64_t>(draw.item<int64_t>());
  }
}

int64_t DataLoader::size() const {
  const int64_t n = dataset_->size();
  const int64_t b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void DataLoader::set_epoch(int64_t epoch) {
  TS_CHECK(epoch >= 0 && epoch < (int64_t{1} << (64 - kEpochOffsetShift)), ValueError,
           "DataLoader: set_epoch expects an epoch in [0, 2^24), got ", epoch);
  epoch_ = epoch;
}

Tensor DataLoader::indices(int64_t epoch) const {
  TS_CHECK(epoch >= 0 && epoch < (int64_t{1} << (64 - kEpochOffsetShift)), ValueError,
           "DataLoader: epoch should be in [0, 2^24), got ", epoch);
  const int64_t n = dataset_->size();
  if (!options_.shuffle) return arange(n, kInt64);
  Generator gen(seed_);
  gen.set_offset(static_cast<uint64_t>(epoch) << kEpochOffsetShift);
  return randperm(n, kInt64, &gen);
}

DataLoader::Iterator DataLoader::begin() {
  Tensor order = indices(epoch_);
  // The epoch is spent even if building its first batch throws: a retry moves on, as a new epoch.
  ++epoch_;
  return Iterator(std::make_unique<detail::EpochRun>(dataset_, options_, std::move(order), size()));
}

// ---- Iterator -----------------------------------------------------------------------------------

DataLoader::Iterator::Iterator() noexcept = default;
DataLoader::Iterator::Iterator(Iterator&&) noexcept = default;
DataLoader::Iterator& DataLoader::Iterator::operator=(Iterator&&) noexcept = default;
DataLoader::Iterator::~Iterator() = default;

DataLoader::Iterator::Iterator(std::unique_ptr<detail::EpochRun> run)
    : run_(std::move(run)), position_(0), num_batches_(run_->num_batches()) {
  load();
}

void DataLoader::Iterator::load() {
  current_ = Example();
  if (position_ >= num_batches_) {
    run_.reset();
    return;
  }
  current_ = run_->next();
  // pin_memory: page-locked batches, so that copies to the GPU can be asynchronous (without a GPU there
  // is nothing to pin for, and the batch stays as it is, as in PyTorch).
  if (run_->options().pin_memory && cuda::is_available()) {
    for (Tensor& t : current_.tensors())
      if (t.defined() && t.is_cpu()) t = t.pin_memory();
  }
}

Example& DataLoader::Iterator::operator*() const {
  TS_CHECK(position_ < num_batches_, IndexError, "DataLoader: dereferenced an iterator at the end of the epoch (",
           num_batches_, " batches)");
  return current_;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  TS_CHECK(position_ < num_batches_, IndexError, "DataLoader: incremented an iterator past the end of the epoch (",
           num_batches_, " batches)");
  ++position_;
  load();
  return *this;
}

}  // namespace tessera::data
