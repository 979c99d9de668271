// DataLoader: batch counts with and without drop_last, the seeded per-epoch order (Note [DataLoader
// order]), identical batches for any number of workers, exceptions from workers, bounded prefetch,
// clean early exits, the TensorDataset fast path against generic stacking, and the Example / collate /
// TensorDataset contracts.
#include <gmock/gmock.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "common/test_util.h"

namespace ts = tessera;
namespace data = tessera::data;
using namespace tessera::testing;
using ::testing::HasSubstr;

namespace {

// x = (n, 2) float32 rows [i, -i]; y = (n,) int64 i: every batch says which samples it holds.
data::TensorDataset numbered(int64_t n) {
  ts::Tensor i = ts::arange(n, ts::kInt64);
  ts::Tensor x = ts::stack({i.to(ts::kFloat32), -i.to(ts::kFloat32)}, 1);
  return data::TensorDataset{x, i};
}

// The sample ids of every batch of one epoch.
std::vector<std::vector<int64_t>> epoch_ids(data::DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (auto& [x, y] : loader) {
    EXPECT_TRUE(all_close(x.select(1, 0), y.to(ts::kFloat32), {0, 0}));  // rows stay with their labels
    out.push_back(y.tolist<int64_t>());
  }
  return out;
}

std::vector<int64_t> flatten(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

// A dataset without a batched path whose get() takes an index-dependent time, so that worker threads
// finish their batches out of order; it counts get() calls.
class SlowDataset : public data::Dataset {
 public:
  explicit SlowDataset(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  data::Example get(int64_t index) const override {
    calls.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::microseconds((index * 7919) % 5 * 200));
    if (index == fail_at) throw ts::IndexError("SlowDataset: sample " + std::to_string(index) + " is unreadable");
    return {ts::full({3}, static_cast<double>(index)), ts::scalar_tensor(index, ts::kInt64)};
  }
  mutable std::atomic<int64_t> calls{0};
  int64_t fail_at = -1;

 private:
  int64_t n_;
};

}  // namespace

TEST(DataLoader, BatchCountsAndSizes) {
  data::TensorDataset ds = numbered(10);
  data::DataLoader keep(ds, {.batch_size = 3});
  EXPECT_EQ(keep.size(), 4);
  std::vector<size_t> sizes;
  for (auto& [x, y] : keep) sizes.push_back(static_cast<size_t>(y.size(0)));
  EXPECT_EQ(sizes, (std::vector<size_t>{3, 3, 3, 1}));
  EXPECT_EQ(flatten(epoch_ids(keep)), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));

  data::DataLoader drop(ds, {.batch_size = 3, .drop_last = true});
  EXPECT_EQ(drop.size(), 3);
  EXPECT_EQ(epoch_ids(drop), (std::vector<std::vector<int64_t>>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}}));

  data::DataLoader exact(ds, {.batch_size = 5, .drop_last = true});
  EXPECT_EQ(exact.size(), 2);
  data::DataLoader too_big(ds, {.batch_size = 11, .drop_last = true});
  EXPECT_EQ(too_big.size(), 0);
  int iterations = 0;
  for (auto& batch : too_big) iterations += static_cast<int>(batch.size());
  EXPECT_EQ(iterations, 0);
  data::DataLoader one(ds, {.batch_size = 11});
  EXPECT_EQ(epoch_ids(one), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}));

  // Batches keep the examples' shapes behind a new batch dim.
  auto it = keep.begin();
  EXPECT_EQ((*it)[0].sizes(), (ts::Shape{3, 2}));
  EXPECT_EQ(it->target().sizes(), (ts::Shape{3}));
  EXPECT_EQ((*it)[1].dtype(), ts::kInt64);
}

TEST(DataLoader, ShuffleVisitsEveryIndexOncePerEpoch) {
  data::TensorDataset ds = numbered(101);
  data::DataLoader loader(ds, {.batch_size = 8, .shuffle = true, .seed = 5});
  std::vector<int64_t> sorted_ids(101);
  std::iota(sorted_ids.begin(), sorted_ids.end(), 0);
  std::set<std::vector<int64_t>> orders;
  for (int epoch = 0; epoch < 4; ++epoch) {
    std::vector<int64_t> ids = flatten(epoch_ids(loader));
    EXPECT_NE(ids, sorted_ids) << "epoch " << epoch << " was not shuffled";
    orders.insert(ids);
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids, sorted_ids) << "epoch " << epoch;
  }
  EXPECT_EQ(orders.size(), 4u);  // a new permutation every epoch
  EXPECT_EQ(loader.epoch(), 4);
}

TEST(DataLoader, SameSeedSameOrder) {
  data::TensorDataset ds = numbered(50);
  data::DataLoader a(ds, {.batch_size = 7, .shuffle = true, .seed = 1234});
  data::DataLoader b(ds, {.batch_size = 7, .shuffle = true, .seed = 1234});
  data::DataLoader c(ds, {.batch_size = 7, .shuffle = true, .seed = 1235});
  std::vector<std::vector<int64_t>> a0 = epoch_ids(a), a1 = epoch_ids(a);
  EXPECT_EQ(a0, epoch_ids(b));
  EXPECT_EQ(a1, epoch_ids(b));
  EXPECT_NE(a0, a1);
  EXPECT_NE(a0, epoch_ids(c));
  // set_epoch replays an epoch; the order is the documented randperm.
  b.set_epoch(0);
  EXPECT_EQ(epoch_ids(b), a0);
  ts::Generator g(1234);
  g.set_offset(uint64_t{1} << 40);
  EXPECT_EQ(flatten(a1), ts::randperm(50, ts::kInt64, &g).tolist<int64_t>());
  EXPECT_EQ(a.indices(1).tolist<int64_t>(), flatten(a1));
  EXPECT_THROW(a.set_epoch(-1), ts::ValueError);

  // Without a seed, the seed comes from the default generator: manual_seed makes it reproducible.
  ts::manual_seed(42);
  data::DataLoader d(ds, {.batch_size = 7, .shuffle = true});
  ts::manual_seed(42);
  data::DataLoader e(ds, {.batch_size = 7, .shuffle = true});
  EXPECT_EQ(d.seed(), e.seed());
  EXPECT_EQ(epoch_ids(d), epoch_ids(e));
}

TEST(DataLoader, WorkersGiveIdenticalBatches) {
  SlowDataset slow(45);
  data::TensorDataset fast = numbered(45);
  for (bool drop_last : {false, true}) {
    std::vector<std::vector<std::vector<int64_t>>> runs;
    for (int64_t workers : {0, 1, 3}) {
      data::DataLoader loader(slow, {.batch_size = 4, .shuffle = true, .num_workers = workers,
                                     .drop_last = drop_last, .seed = 9});
      std::vector<std::vector<int64_t>> epochs;
      for (int epoch = 0; epoch < 2; ++epoch) {
        for (auto& [x, y] : loader) {
          EXPECT_EQ(x.sizes(), (ts::Shape{y.size(0), 3}));
          epochs.push_back(y.tolist<int64_t>());
        }
      }
      runs.push_back(epochs);
      data::DataLoader tl(fast, {.batch_size = 4, .shuffle = true, .num_workers = workers,
                                 .drop_last = drop_last, .seed = 9});
      std::vector<std::vector<int64_t>> tensor_epochs = epoch_ids(tl);
      std::vector<std::vector<int64_t>> more = epoch_ids(tl);
      tensor_epochs.insert(tensor_epochs.end(), more.begin(), more.end());
      EXPECT_EQ(tensor_epochs, epochs) << workers << " workers";
    }
    EXPECT_EQ(runs[1], runs[0]);
    EXPECT_EQ(runs[2], runs[0]);
    EXPECT_EQ(runs[0].size(), drop_last ? 22u : 24u);
  }
}

TEST(DataLoader, ExceptionInCollatePropagatesAtItsBatch) {
  data::TensorDataset ds = numbered(20);
  for (int64_t workers : {0, 1, 3}) {
    auto collate = [](std::vector<data::Example> examples) {
      for (const data::Example& ex : examples) {
        if (ex.target().item<int64_t>() == 9) throw ts::ValueError("collate: sample 9 is poisoned");
      }
      return data::default_collate(examples);
    };
    data::DataLoader loader(ds, {.batch_size = 4, .num_workers = workers, .collate = collate});
    std::vector<int64_t> seen;
    try {
      for (auto& [x, y] : loader) seen.push_back(y[0].item<int64_t>());
      ADD_FAILURE() << "expected the collate's ValueError";
    } catch (const ts::ValueError& e) {
      EXPECT_THAT(e.what(), HasSubstr("sample 9 is poisoned"));
    }
    EXPECT_EQ(seen, (std::vector<int64_t>{0, 4})) << workers << " workers";  // batch 2 holds 8..11

    // Past the failed batch, the iteration can go on.
    auto it = loader.begin();
    ++it;
    EXPECT_THROW(++it, ts::ValueError);
    EXPECT_EQ(it.batch_index(), 2);
    ++it;
    EXPECT_EQ(it->target()[0].item<int64_t>(), 12);
  }
}

TEST(DataLoader, ExceptionInDatasetPropagates) {
  SlowDataset ds(30);
  ds.fail_at = 0;
  for (int64_t workers : {0, 2}) {
    data::DataLoader loader(ds, {.batch_size = 5, .num_workers = workers});
    // The first batch fails: begin() itself throws.
    EXPECT_THROW(loader.begin(), ts::IndexError) << workers << " workers";
  }
  ds.fail_at = 17;
  data::DataLoader loader(ds, {.batch_size = 5, .num_workers = 2});
  int batches = 0;
  try {
    for (auto& batch : loader) batches += batch.empty() ? 0 : 1;
    ADD_FAILURE() << "expected an IndexError";
  } catch (const ts::IndexError& e) {
    EXPECT_THAT(e.what(), HasSubstr("sample 17"));
  }
  EXPECT_EQ(batches, 3);
}

namespace {

// A dataset whose sample `fail_at` throws a plain std::runtime_error (not a tessera::Error), after
// the others have been slow enough that several workers are mid-sample when it does.
class ThrowingDataset : public data::Dataset {
 public:
  explicit ThrowingDataset(int64_t n, int64_t fail_at) : n_(n), fail_at_(fail_at) {}
  int64_t size() const override { return n_; }
  data::Example get(int64_t index) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (index == fail_at_) throw std::runtime_error("ThrowingDataset: disk read failed at sample " + std::to_string(index));
    return {ts::full({2}, static_cast<double>(index)), ts::scalar_tensor(index, ts::kInt64)};
  }

 private:
  int64_t n_, fail_at_;
};

// Aborts the test binary if a scope outlives its deadline, so that a hang is a failure with a
// message rather than a CI timeout.
class Watchdog {
 public:
  explicit Watchdog(std::chrono::seconds limit) : thread_([this, limit] {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
        std::fprintf(stderr, "Watchdog: the DataLoader did not finish within its deadline (a hang)\n");
        std::abort();
      }
    }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

// An exception inside a worker is re-raised in the iterating thread, with its type and the worker's
// message, at the batch that holds the sample; the other workers are stopped and joined when the
// iterator goes (no hang at exit), and the next epoch starts cleanly.
TEST(DataLoader, WorkerExceptionIsReraisedWithItsMessageAndNothingHangs) {
  Watchdog watchdog(std::chrono::seconds(60));
  ThrowingDataset ds(400, 123);
  data::DataLoader loader(ds, {.batch_size = 4, .num_workers = 4, .prefetch_factor = 4});
  for (int epoch = 0; epoch < 3; ++epoch) {
    SCOPED_TRACE("epoch " + std::to_string(epoch));
    int64_t batches = 0;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      for (auto& [x, y] : loader) {
        EXPECT_EQ(y[0].item<int64_t>(), batches * 4);  // the batches before the failure are intact, in order
        ++batches;
      }
      ADD_FAILURE() << "expected the worker's std::runtime_error";
    } catch (const std::runtime_error& e) {
      EXPECT_THAT(e.what(), HasSubstr("ThrowingDataset: disk read failed at sample 123"));
    }
    EXPECT_EQ(batches, 123 / 4);  // batch 30 holds sample 123
    // Leaving the loop joined the workers promptly: well under the time the remaining 277 samples take.
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  }
}

TEST(DataLoader, EarlyBreakStopsAndJoinsWorkers) {
  SlowDataset ds(2000);
  {
    data::DataLoader loader(ds, {.batch_size = 1, .num_workers = 3, .prefetch_factor = 2});
    int taken = 0;
    for (auto& [x, y] : loader) {
      EXPECT_EQ(x.size(0), y.size(0));
      if (++taken == 2) break;
    }
  }
  // The iterator is gone and its threads joined: nothing reads the dataset any more.
  const int64_t calls = ds.calls.load();
  EXPECT_LE(calls, 2 + 3 * 2 + 3);  // taken + queue capacity + one in flight per worker
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(ds.calls.load(), calls);

  // Dropping a just-started epoch, and an iterator moved around, also join cleanly.
  data::DataLoader loader(ds, {.batch_size = 10, .num_workers = 2});
  for (int i = 0; i < 3; ++i) {
    data::DataLoader::Iterator it = loader.begin();
    data::DataLoader::Iterator moved = std::move(it);
    ++moved;
  }
}

TEST(DataLoader, PrefetchIsBounded) {
  data::TensorDataset ds = numbered(100);
  std::atomic<int64_t> built{0};
  auto counting = [&](std::vector<data::Example> examples) {
    built.fetch_add(1);
    return data::default_collate(examples);
  };
  data::DataLoader loader(ds, {.batch_size = 2, .num_workers = 2, .prefetch_factor = 2, .collate = counting});
  // Waits until `want` batches were built (or a generous deadline), then a little longer to see that
  // no more are.
  auto settle = [&](int64_t want) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (built.load() < want && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return built.load();
  };
  auto it = loader.begin();          // batch 0 taken
  EXPECT_EQ(settle(1 + 2 * 2), 5);   // batch 0 plus a full window of 4
  ++it;
  EXPECT_EQ(settle(2 + 2 * 2), 6);
}

TEST(DataLoader, TensorDatasetFastPathEqualsStacking) {
  ts::Tensor x = test_data({23, 3, 2}, ts::kFloat32, 3);
  ts::Tensor y = test_data({23}, ts::kInt64, 4, 0, 10);
  ts::Tensor m = test_data({23, 4}, ts::kBool, 5);
  // The dataset's tensors may be views with any strides.
  data::TensorDataset ds{x.transpose(1, 2).contiguous().transpose(1, 2), y, m};
  for (int64_t workers : {0, 2}) {
    data::DataLoader fast(ds, {.batch_size = 5, .shuffle = true, .num_workers = workers, .seed = 77});
    data::DataLoader generic(ds, {.batch_size = 5, .shuffle = true, .num_workers = workers, .seed = 77,
                                  .collate = data::default_collate});
    auto a = fast.begin();
    auto b = generic.begin();
    int n = 0;
    for (; a != fast.end() && b != generic.end(); ++a, ++b, ++n) {
      ASSERT_EQ(a->size(), 3u);
      for (size_t j = 0; j < 3; ++j) {
        EXPECT_EQ((*a)[j].dtype(), (*b)[j].dtype());
        EXPECT_TRUE(all_close((*a)[j], (*b)[j], {0, 0})) << "batch " << n << " tensor " << j;
      }
      EXPECT_FALSE((*a)[0].is_alias_of(ds.tensors()[0]));  // batches are copies, never views
    }
    EXPECT_EQ(n, 5);
    EXPECT_TRUE(a == fast.end() && b == generic.end());
  }

  // The fast path really is taken: get() is never called.
  struct Counting : data::TensorDataset {
    using data::TensorDataset::TensorDataset;
    data::Example get(int64_t i) const override {
      gets.fetch_add(1);
      return data::TensorDataset::get(i);
    }
    mutable std::atomic<int> gets{0};
  };
  Counting counting{x, y};
  data::DataLoader fast(counting, {.batch_size = 4});
  for (auto& [bx, by] : fast) EXPECT_EQ(bx.size(0), by.size(0));
  EXPECT_EQ(counting.gets.load(), 0);
}

TEST(DataLoader, StructuredBindingsAndOwnership) {
  // An rvalue dataset is owned by the loader.
  data::DataLoader loader(numbered(6), {.batch_size = 4});
  for (auto& [x, y] : loader) {
    x = x * 2;  // a reference into the batch
    EXPECT_TRUE(all_close(x.select(1, 0), y.to(ts::kFloat32) * 2, {0, 0}));
  }
  for (const auto& batch : loader) EXPECT_EQ(batch.size(), 2u);

  data::Example three{ts::zeros({1}), ts::zeros({1}), ts::zeros({1})};
  EXPECT_THROW(([&] {
                 auto& [a, b] = three;
                 (void)a;
                 (void)b;
               }()),
               ts::ValueError);
  EXPECT_THROW(three[3], ts::IndexError);

  // A dataset of three tensors batches to examples of three; index them.
  data::TensorDataset ds3{ts::zeros({4, 2}), ts::ones({4}), ts::arange(4, ts::kInt64)};
  data::DataLoader l3(ds3, {.batch_size = 2});
  for (auto& batch : l3) EXPECT_EQ(batch[2].sizes(), (ts::Shape{2}));
}

TEST(DataLoader, OptionAndCollateErrors) {
  data::TensorDataset ds = numbered(4);
  EXPECT_THROW(data::DataLoader(ds, {.batch_size = 0}), ts::ValueError);
  EXPECT_THROW(data::DataLoader(ds, {.num_workers = -1}), ts::ValueError);
  EXPECT_THROW(data::DataLoader(ds, {.prefetch_factor = 0}), ts::ValueError);
  EXPECT_THROW(data::DataLoader(std::shared_ptr<const data::Dataset>(), {}), ts::ValueError);

  EXPECT_THROW(data::default_collate({}), ts::ValueError);
  EXPECT_THROW(data::default_collate({{ts::zeros({2})}, {ts::zeros({3})}}), ts::ShapeError);
  EXPECT_THROW(data::default_collate({{ts::zeros({2})}, {ts::zeros({2}), ts::zeros({2})}}), ts::ValueError);
  data::Example scalars = data::default_collate({{ts::scalar_tensor(1, ts::kInt64)}, {ts::scalar_tensor(2, ts::kInt64)}});
  EXPECT_EQ(scalars[0].tolist<int64_t>(), (std::vector<int64_t>{1, 2}));
}

TEST(TensorDataset, ChecksAndIndexing) {
  EXPECT_THROW(data::TensorDataset(std::vector<ts::Tensor>{}), ts::ValueError);
  EXPECT_THROW((data::TensorDataset{ts::zeros({3, 2}), ts::zeros({4})}), ts::ShapeError);
  EXPECT_THROW((data::TensorDataset{ts::zeros({})}), ts::ShapeError);
  data::TensorDataset ds = numbered(5);
  EXPECT_EQ(ds.size(), 5);
  EXPECT_EQ(ds.get(-1).target().item<int64_t>(), 4);
  EXPECT_EQ(ds.get(2).data().tolist<double>(), (std::vector<double>{2, -2}));
  EXPECT_THROW(ds.get(5), ts::IndexError);
  EXPECT_THROW(ds.get(-6), ts::IndexError);
}
