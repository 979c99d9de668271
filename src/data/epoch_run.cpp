// EpochRun: builds one epoch's batches, in the calling thread or in prefetching worker threads.
//
// Workers claim batch indices in increasing order from a shared counter, but only within
// [next_consume_, next_consume_ + capacity_), which bounds the memory held by finished batches. Which
// worker builds a batch varies from run to run; what the batch holds does not (its indices are fixed by
// the order), and next() hands batches out by index, so the sequence is deterministic.
#include "data/epoch_run.h"

#include <algorithm>
#include <utility>

#include "tessera/autograd.h"
#include "tessera/error.h"

namespace tessera::data::detail {

EpochRun::EpochRun(std::shared_ptr<const Dataset> dataset, const DataLoaderOptions& options, Tensor order,
                   int64_t num_batches)
    : dataset_(std::move(dataset)),
      options_(options),
      order_(std::move(order)),
      order_values_(order_.tolist<int64_t>()),
      num_batches_(num_batches) {
  const int64_t workers = std::min(options_.num_workers, num_batches_);
  if (workers <= 0) return;
  capacity_ = options_.num_workers * options_.prefetch_factor;
  try {
    for (int64_t w = 0; w < workers; ++w) workers_.emplace_back([this] { worker_loop(); });
  } catch (...) {
    // A thread that could not start: the ones already running must not outlive this object.
    stop_and_join();
    throw;
  }
}

EpochRun::~EpochRun() { stop_and_join(); }

void EpochRun::stop_and_join() noexcept {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  space_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
}

Example EpochRun::build(int64_t b) const {
  const int64_t n = static_cast<int64_t>(order_values_.size());
  const int64_t lo = b * options_.batch_size;
  const int64_t hi = std::min(n, lo + options_.batch_size);
  if (!options_.collate) {
    if (std::optional<Example> batch = dataset_->get_batch(order_.slice(0, lo, hi).contiguous())) {
      return std::move(*batch);
    }
  }
  std::vector<Example> examples;
  examples.reserve(static_cast<size_t>(hi - lo));
  for (int64_t i = lo; i < hi; ++i) examples.push_back(dataset_->get(order_values_[static_cast<size_t>(i)]));
  return options_.collate ? options_.collate(std::move(examples)) : default_collate(examples);
}

void EpochRun::worker_loop() {
  // Loading data records no autograd history, whatever the dataset's tensors are.
  NoGradGuard no_grad;
  for (;;) {
    int64_t b;
    {
      std::unique_lock<std::mutex> lock(mu_);
      space_.wait(lock, [&] {
        return stop_ || next_claim_ >= num_batches_ || next_claim_ < next_consume_ + capacity_;
      });
      if (stop_ || next_claim_ >= num_batches_) return;
      b = next_claim_++;
    }
    Result r;
    try {
      r.batch = build(b);
    } catch (...) {
      r.error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      if (stop_) return;
      done_.emplace(b, std::move(r));
    }
    ready_.notify_one();
  }
}

Example EpochRun::next() {
  TS_CHECK(next_consume_ < num_batches_, IndexError, "DataLoader: the epoch has no batch ", next_consume_,
           " (it has ", num_batches_, ")");
  if (workers_.empty()) {
    NoGradGuard no_grad;
    return build(next_consume_++);  // advances past a failing batch too, as the threaded path does
  }
  Result r;
  {
    std::unique_lock<std::mutex> lock(mu_);
    ready_.wait(lock, [&] { return done_.count(next_consume_) > 0; });
    auto node = done_.extract(next_consume_);
    r = std::move(node.mapped());
    ++next_consume_;
  }
  space_.notify_all();
  if (r.error) std::rethrow_exception(r.error);
  return std::move(r.batch);
}

}  // namespace tessera::data::detail
