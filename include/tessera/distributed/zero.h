// optim::ZeroRedundancyOptimizer: ZeRO stage 1 (Rajbhandari et al.), as llm.c does it. Every rank
// keeps the optimizer state of one shard of the parameters only, so the state's memory is divided by
// the world size:
//
//   ts::optim::ZeroRedundancyOptimizer<ts::optim::AdamW> opt(net.parameters(), {.lr = 3e-4});
//   for (...) { opt.zero_grad(); loss(net(x), y).backward(); opt.step(); }
//
// Note [ZeRO flat shards]: the parameters (one dtype, one device, contiguous) are laid out end to end
// in a flat vector of N elements, padded with zeros to a multiple of the world size W; rank r owns the
// elements [r S, (r + 1) S), S = ceil(N / W), which may cut a parameter in two. step() is llm.c's
// order: (1) the gradients, flattened, are reduce-scattered with Avg, so that each rank receives the
// averaged gradient of its shard only (or, with reduce_gradients = false, when a DDP wrapper has
// averaged them already, each rank takes its shard of them); (2) the wrapped optimizer, built on one
// flat parameter (the shard), steps it; (3) the shards are all-gathered and copied back into the
// parameters. The optimizers' updates are elementwise (SGD, Adam, AdamW, RMSprop, Adagrad), so the
// result is the plain optimizer's on the averaged gradients, bit for bit. Two consequences: the
// options apply to the shard as one group (one set of options for every parameter), and a parameter
// without a gradient is stepped with a zero gradient (the plain optimizers skip it), since a flat
// shard cannot skip part of itself. The shard is refreshed from the parameters before each step, so
// that values written into them (a broadcast, a loaded checkpoint) are the ones stepped.
//
// Learning-rate schedulers drive the wrapped optimizer: `ts::optim::StepLR sched(opt.optim(), ...)`.
//
// Checkpoints: save_shard writes this rank's state; load_shards reads the state saved by any number of
// ranks and takes this rank's shard of it (Note [ZeRO resharding] in src/distributed/zero.cpp).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/distributed.h"
#include "tessera/optim.h"

namespace tessera::optim {

struct ZeroRedundancyOptions {
  bool reduce_gradients = true;                        // false: gradients are averaged already (DDP)
  distributed::ProcessGroup* process_group = nullptr;  // default: the default group
};

class ZeroRedundancyOptimizerBase {
 public:
  using Factory = std::function<std::unique_ptr<Optimizer>(std::vector<Tensor> shard)>;
  ZeroRedundancyOptimizerBase(std::vector<Tensor> params, Factory make_optimizer, ZeroRedundancyOptions options);
  virtual ~ZeroRedundancyOptimizerBase();
  ZeroRedundancyOptimizerBase(const ZeroRedundancyOptimizerBase&) = delete;
  ZeroRedundancyOptimizerBase& operator=(const ZeroRedundancyOptimizerBase&) = delete;

  void step();
  void zero_grad(bool set_to_none = true);

  Optimizer& local_optimizer() { return *optimizer_; }        // the wrapped optimizer, on this rank's shard
  const Optimizer& local_optimizer() const { return *optimizer_; }
  const std::vector<Tensor>& params() const { return params_; }
  int64_t numel() const { return numel_; }                     // N, every parameter's elements
  int64_t shard_numel() const { return shard_numel_; }         // S
  int64_t shard_offset() const { return shard_numel_ * rank_; }  // where this rank's shard starts
  int world_size() const { return world_; }

  // Writes this rank's optimizer state to `dir`/zero_optimizer.rank<r>.safetensors (the directory
  // must exist), with the training step it belongs to; every rank calls it.
  void save_shard(const std::string& dir, int64_t step = 0) const;
  // Reads the shards saved by every rank of a run with any world size (all of them, from `dir`) and
  // loads this rank's part. IOError for a missing shard or one of another step than expected_step,
  // ValueError for a state of other parameters (another element count or optimizer).
  void load_shards(const std::string& dir, std::optional<int64_t> expected_step = std::nullopt);

 private:
  std::vector<Tensor> params_;
  std::vector<int64_t> offsets_;
  distributed::ProcessGroup* group_;
  ZeroRedundancyOptions options_;
  int rank_ = 0, world_ = 1;
  int64_t numel_ = 0, shard_numel_ = 0;
  Tensor shard_;       // (S): this rank's parameters, the wrapped optimizer's one parameter
  Tensor flat_grad_;   // (W S)
  Tensor flat_param_;  // (W S)
  Tensor shard_grad_;  // (S)
  std::unique_ptr<Optimizer> optimizer_;

  void copy_params_into_shard();
};

// The typed front: ZeroRedundancyOptimizer<AdamW>(params, {.lr = ...}).
template <class Opt, class Options = std::remove_cvref_t<decltype(std::declval<const Opt&>().defaults())>>
class ZeroRedundancyOptimizer : public ZeroRedundancyOptimizerBase {
 public:
  explicit ZeroRedundancyOptimizer(std::vector<Tensor> params, Options options = {},
                                   ZeroRedundancyOptions zero_options = {})
      : ZeroRedundancyOptimizerBase(
            std::move(params),
            [options](std::vector<Tensor> shard) { return std::make_unique<Opt>(std::move(shard), options); },
            zero_options) {}
  Opt& optim() { return static_cast<Opt&>(local_optimizer()); }
};

}  // namespace tessera::optim
