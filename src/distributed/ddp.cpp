// nn::DistributedDataParallel: construction (rank 0's parameters and buffers broadcast, the reducer
// built), forward (buffers broadcast first) and the bucket accessors. The gradient side is
// ddp_reducer.cpp.
#include "tessera/distributed/ddp.h"

#include "distributed/ddp_reducer.h"
#include "tessera/autograd.h"

namespace tessera::nn {

namespace {

// Starts every broadcast, then waits for them all (one round of latency, not one per tensor).
void broadcast_all(distributed::ProcessGroup& group, const std::vector<std::pair<std::string, Tensor>>& tensors) {
  if (group.size() == 1) return;
  NoGradGuard no_grad;
  std::vector<distributed::WorkPtr> works;
  works.reserve(tensors.size());
  for (const auto& [name, t] : tensors) works.push_back(group.broadcast(t, 0));
  for (auto& w : works) w->wait();
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(Module& module, DistributedDataParallelOptions options)
    : module_(&module), options_(options),
      group_(options.process_group ? options.process_group : &distributed::default_group()) {
  // Not owned: an aliasing pointer with no owner (the caller keeps the module alive).
  register_module("module", std::shared_ptr<Module>(std::shared_ptr<Module>(), &module));
  const auto params = module.named_parameters();
  const auto buffers = module.named_buffers();
  const Device want = group_->device();
  for (const auto* list : {&params, &buffers}) {
    for (const auto& [name, t] : *list) {
      TS_CHECK(t.device() == want, DeviceError, "DistributedDataParallel: the ", group_->backend(),
               " process group works on ", want.str(), " tensors, but module tensor ", name, " is on ",
               t.device().str());
      TS_CHECK(t.is_contiguous(), ValueError, "DistributedDataParallel: module tensor ", name,
               " must be contiguous (sizes ", t.sizes(), ", strides ", t.strides(), ")");
    }
  }
  broadcast_all(*group_, params);
  broadcast_all(*group_, buffers);
  reducer_ = std::make_unique<Reducer>(*group_, options_, require_sync_, params);
}

DistributedDataParallel::~DistributedDataParallel() = default;

Tensor DistributedDataParallel::forward(Tensor input) {
  reducer_->check_finished_previous();
  if (options_.broadcast_buffers) broadcast_all(*group_, module_->named_buffers());
  return (*module_)(std::move(input));
}

size_t DistributedDataParallel::num_buckets() const { return reducer_->buckets.size(); }

std::vector<std::string> DistributedDataParallel::bucket_parameter_names(size_t bucket) const {
  TS_CHECK(bucket < reducer_->buckets.size(), IndexError, "DistributedDataParallel.bucket_parameter_names: bucket ",
           bucket, " is out of range (", reducer_->buckets.size(), " buckets)");
  std::vector<std::string> names;
  for (size_t i : reducer_->buckets[bucket].slots) names.push_back(reducer_->slots[i].name);
  return names;
}

size_t DistributedDataParallel::bucket_bytes(size_t bucket) const {
  TS_CHECK(bucket < reducer_->buckets.size(), IndexError, "DistributedDataParallel.bucket_bytes: bucket ", bucket,
           " is out of range (", reducer_->buckets.size(), " buckets)");
  const Tensor& b = reducer_->buckets[bucket].buffer;
  return static_cast<size_t>(b.numel()) * element_size(b.dtype());
}

size_t DistributedDataParallel::buckets_started_in_backward() const { return reducer_->last_started_in_backward; }

}  // namespace tessera::nn
