// data::DistributedSampler (Note [DistributedSampler] in tessera/distributed.h): PyTorch's algorithm,
// with tessera's generator for the permutation (the same on every rank for the same seed and epoch).
#include "tessera/distributed.h"
#include "tessera/functions.h"
#include "tessera/generator.h"

namespace tessera::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, DistributedSamplerOptions options)
    : n_(dataset_size), shuffle_(options.shuffle), drop_last_(options.drop_last), seed_(options.seed) {
  TS_CHECK(dataset_size >= 0, ValueError, "DistributedSampler: the dataset size must be non-negative, got ", dataset_size);
  num_replicas_ = options.num_replicas ? *options.num_replicas : distributed::get_world_size();
  rank_ = options.rank ? *options.rank : distributed::get_rank();
  TS_CHECK(num_replicas_ >= 1, ValueError, "DistributedSampler: num_replicas must be positive, got ", num_replicas_);
  TS_CHECK(rank_ >= 0 && rank_ < num_replicas_, ValueError, "DistributedSampler: Invalid rank ", rank_,
           ", rank should be in the interval [0, ", num_replicas_ - 1, "]");
  if (drop_last_ && n_ % num_replicas_ != 0) num_samples_ = (n_ - num_replicas_ + num_replicas_ - 1) / num_replicas_;
  else num_samples_ = (n_ + num_replicas_ - 1) / num_replicas_;
  if (num_samples_ < 0) num_samples_ = 0;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> all;
  if (shuffle_) {
    Generator g(seed_ + static_cast<uint64_t>(epoch_));
    all = randperm(n_, kInt64, &g).tolist<int64_t>();
  } else {
    all.resize(n_);
    for (int64_t i = 0; i < n_; ++i) all[i] = i;
  }
  const int64_t total = total_size();
  if (!drop_last_) {
    // Pad by repeating the first indices (several times when the dataset is smaller than the padding).
    const int64_t pad = total - n_;
    for (int64_t k = 0; k < pad && n_ > 0; ++k) all.push_back(all[k % n_]);
  } else {
    all.resize(total);
  }
  std::vector<int64_t> mine;
  mine.reserve(num_samples_);
  for (int64_t i = rank_; i < total; i += num_replicas_) mine.push_back(all[i]);
  return mine;
}

}  // namespace tessera::data
