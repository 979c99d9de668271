// One epoch of a DataLoader: the batches of a fixed sample order, built in the calling thread or by
// worker threads that prefetch into a bounded window (Note [DataLoader workers] in
// tessera/data/dataloader.h).
//
// Invariants: batches are handed out strictly in index order; at most `capacity_` batches beyond the
// one last handed out are claimed by workers; every worker is joined by the destructor, whatever state
// the epoch is in.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tessera/data/dataloader.h"

namespace tessera::data::detail {

class EpochRun {
 public:
  // `order`: the epoch's sample indices (1-D int64, CPU), batched in runs of options.batch_size.
  EpochRun(std::shared_ptr<const Dataset> dataset, const DataLoaderOptions& options, Tensor order,
           int64_t num_batches);
  ~EpochRun();
  EpochRun(const EpochRun&) = delete;
  EpochRun& operator=(const EpochRun&) = delete;

  int64_t num_batches() const { return num_batches_; }
  const DataLoaderOptions& options() const { return options_; }
  // The next batch in order; rethrows the exception that building it raised.
  Example next();

 private:
  struct Result {
    Example batch;
    std::exception_ptr error;
  };

  Example build(int64_t b) const;  // batch b: fetch its examples and collate them
  void worker_loop();
  void stop_and_join() noexcept;

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  Tensor order_;
  std::vector<int64_t> order_values_;
  int64_t num_batches_;
  int64_t capacity_ = 0;

  std::mutex mu_;
  std::condition_variable ready_;  // a batch was finished (the consumer waits)
  std::condition_variable space_;  // a batch was consumed, or stop (workers wait)
  int64_t next_claim_ = 0;         // the next batch a worker will build
  int64_t next_consume_ = 0;       // the next batch next() hands out
  bool stop_ = false;
  std::map<int64_t, Result> done_;  // finished, not yet consumed; keyed by batch index
  std::vector<std::thread> workers_;
};

}  // namespace tessera::data::detail
