// Data-parallel checkpoints: rank 0 writes the model and the rest, every rank its ZeRO shard
// (tessera/distributed/checkpoint.h).
#include "tessera/distributed/checkpoint.h"

#include "tessera/distributed/ddp.h"

namespace tessera::distributed {

namespace {

const nn::Module& unwrap(const nn::Module& m) {
  if (const auto* ddp = dynamic_cast<const nn::DistributedDataParallel*>(&m)) return ddp->module();
  return m;
}
nn::Module& unwrap(nn::Module& m) {
  if (auto* ddp = dynamic_cast<nn::DistributedDataParallel*>(&m)) return ddp->module();
  return m;
}

}  // namespace

void save_checkpoint(const std::string& dir, const nn::Module& model, const optim::Optimizer* optimizer,
                     const optim::LRScheduler* scheduler, int64_t step, const NamedGenerators& generators) {
  barrier();  // every rank has finished the step being saved
  if (get_rank() == 0) tessera::save_checkpoint(dir, unwrap(model), optimizer, scheduler, step, generators);
  barrier();  // the checkpoint exists for every rank once this returns
}

void save_checkpoint(const std::string& dir, const nn::Module& model, const optim::ZeroRedundancyOptimizerBase& zero,
                     const optim::LRScheduler* scheduler, int64_t step, const NamedGenerators& generators) {
  distributed::save_checkpoint(dir, model, static_cast<const optim::Optimizer*>(nullptr), scheduler, step, generators);
  zero.save_shard(dir, step);
  barrier();
}

int64_t load_checkpoint(const std::string& dir, nn::Module& model, optim::Optimizer* optimizer,
                        optim::LRScheduler* scheduler, const NamedGenerators& generators) {
  return tessera::load_checkpoint(dir, unwrap(model), optimizer, scheduler, generators);
}

int64_t load_checkpoint(const std::string& dir, nn::Module& model, optim::ZeroRedundancyOptimizerBase& zero,
                        optim::LRScheduler* scheduler, const NamedGenerators& generators) {
  const int64_t step = tessera::load_checkpoint(dir, unwrap(model), nullptr, scheduler, generators);
  zero.load_shards(dir, step);
  return step;
}

}  // namespace tessera::distributed
