// ZeroRedundancyOptimizer: the flat shard layout, llm.c's step order (reduce-scatter, step on the
// shard, all-gather) and the sharded checkpoints (Note [ZeRO flat shards] in
// tessera/distributed/zero.h).
//
// Note [ZeRO resharding]: a shard file holds the wrapped optimizer's state_dict for its rank's flat
// shard (tensors of S' elements, and 0-dim values such as Adam's "step", equal on every rank) with
// the world size, element count and shard size of the run that wrote it. Loading reads every rank's
// file, joins each state tensor in rank order (W' S' elements), drops the padding (N elements: the
// state of the whole flat vector), pads again for the current world size and takes this rank's
// slice. So a run on W ranks resumes from a checkpoint written by W' ranks, 1 among them, and the
// state every element sees is the one it had.
#include "tessera/distributed/zero.h"

#include <filesystem>

#include "tessera/autograd.h"
#include "tessera/functions.h"
#include "tessera/safetensors.h"

namespace tessera::optim {

using ::tessera::detail::str_cat;

namespace {

std::string shard_path(const std::string& dir, int rank) {
  return (std::filesystem::path(dir) / str_cat("zero_optimizer.rank", rank, ".safetensors")).string();
}

int64_t meta_int(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& path) {
  auto it = meta.find(key);
  TS_CHECK(it != meta.end(), IOError, "ZeroRedundancyOptimizer.load_shards: ", path, " has no '", key,
           "' in its metadata (not a ZeRO shard file)");
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    TS_THROW(IOError, "ZeroRedundancyOptimizer.load_shards: ", path, ": metadata '", key, "' is '", it->second,
             "', not an integer");
  }
}

}  // namespace

ZeroRedundancyOptimizerBase::ZeroRedundancyOptimizerBase(std::vector<Tensor> params, Factory make_optimizer,
                                                         ZeroRedundancyOptions options)
    : params_(std::move(params)),
      group_(options.process_group ? options.process_group : &distributed::default_group()),
      options_(options) {
  TS_CHECK(!params_.empty(), ValueError, "ZeroRedundancyOptimizer: optimizer got an empty parameter list");
  rank_ = group_->rank();
  world_ = group_->size();
  const Tensor& first = params_.front();
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    TS_CHECK(p.defined() && p.is_leaf() && p.requires_grad(), ValueError, "ZeroRedundancyOptimizer: parameter ", i,
             " must be a leaf tensor that requires grad");
    TS_CHECK(p.dtype() == first.dtype(), DTypeError, "ZeroRedundancyOptimizer: every parameter must have one dtype "
             "(the flat shard's); parameter 0 is ", dtype_name(first.dtype()), ", parameter ", i, " is ",
             dtype_name(p.dtype()));
    TS_CHECK(p.device() == group_->device(), DeviceError, "ZeroRedundancyOptimizer: the ", group_->backend(),
             " process group works on ", group_->device().str(), " tensors, but parameter ", i, " is on ",
             p.device().str());
    TS_CHECK(p.is_contiguous(), ValueError, "ZeroRedundancyOptimizer: parameter ", i, " must be contiguous (sizes ",
             p.sizes(), ", strides ", p.strides(), ")");
    offsets_.push_back(numel_);
    numel_ += p.numel();
  }
  TS_CHECK(numel_ > 0, ValueError, "ZeroRedundancyOptimizer: the parameters have no elements");
  shard_numel_ = (numel_ + world_ - 1) / world_;
  const TensorOptions opts(first.dtype(), first.device());
  flat_grad_ = zeros({shard_numel_ * world_}, opts);  // the padding stays zero
  flat_param_ = zeros({shard_numel_ * world_}, opts);
  shard_grad_ = zeros({shard_numel_}, opts);
  shard_ = zeros({shard_numel_}, opts);
  copy_params_into_shard();
  shard_.requires_grad_(true);
  optimizer_ = make_optimizer({shard_});
}

ZeroRedundancyOptimizerBase::~ZeroRedundancyOptimizerBase() = default;

void ZeroRedundancyOptimizerBase::copy_params_into_shard() {
  NoGradGuard no_grad;
  const int64_t lo = shard_offset(), hi = lo + shard_numel_;
  for (size_t i = 0; i < params_.size(); ++i) {
    const int64_t off = offsets_[i], n = params_[i].numel();
    const int64_t a = std::max(off, lo), b = std::min(off + n, hi);
    if (a >= b) continue;
    shard_.narrow(0, a - lo, b - a).copy_(params_[i].view({n}).narrow(0, a - off, b - a));
  }
}

void ZeroRedundancyOptimizerBase::step() {
  NoGradGuard no_grad;
  // (1) The flat gradient, then this rank's averaged shard of it.
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    Tensor slot = flat_grad_.narrow(0, offsets_[i], p.numel());
    const Tensor g = p.grad();
    if (g.defined()) slot.view(p.sizes()).copy_(g);
    else slot.zero_();  // Note [ZeRO flat shards]: stepped with a zero gradient
  }
  if (options_.reduce_gradients && world_ > 1) {
    group_->reduce_scatter(shard_grad_, flat_grad_, distributed::ReduceOp::Avg)->wait();
  } else {
    shard_grad_.copy_(flat_grad_.narrow(0, shard_offset(), shard_numel_));
  }
  // (2) The step on the shard, from the parameters' current values.
  copy_params_into_shard();
  shard_.set_grad(shard_grad_);
  optimizer_->step();
  // (3) Every rank's shard, back into the parameters.
  if (world_ > 1) group_->all_gather(flat_param_, shard_.detach())->wait();
  else flat_param_.copy_(shard_.detach());
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    p.copy_(flat_param_.narrow(0, offsets_[i], p.numel()).view(p.sizes()));
  }
}

void ZeroRedundancyOptimizerBase::zero_grad(bool set_to_none) {
  for (const Tensor& p : params_) p.zero_grad(set_to_none);
}

void ZeroRedundancyOptimizerBase::save_shard(const std::string& dir, int64_t step) const {
  const OptimizerStateDict sd = optimizer_->state_dict();
  const std::string path = shard_path(dir, rank_);
  const std::string tmp = path + ".tmp";
  save_safetensors(sd.state, tmp,
                   {{"format", "tessera.zero1"},
                    {"optimizer", optimizer_->name()},
                    {"world_size", std::to_string(world_)},
                    {"rank", std::to_string(rank_)},
                    {"numel", std::to_string(numel_)},
                    {"shard_numel", std::to_string(shard_numel_)},
                    {"step", std::to_string(step)},
                    {"param_groups", sd.param_groups}});
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  TS_CHECK(!ec, IOError, "ZeroRedundancyOptimizer.save_shard: cannot rename ", tmp, " to ", path, ": ", ec.message());
}

void ZeroRedundancyOptimizerBase::load_shards(const std::string& dir, std::optional<int64_t> expected_step) {
  const std::string where = "ZeroRedundancyOptimizer.load_shards";
  const std::string path0 = shard_path(dir, 0);
  TS_CHECK(std::filesystem::exists(path0), IOError, where, ": no shard file ", path0);
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  files.push_back(std::make_unique<SafetensorsFile>(path0));
  const auto& meta = files[0]->metadata();
  const int64_t saved_world = meta_int(meta, "world_size", path0);
  const int64_t saved_numel = meta_int(meta, "numel", path0);
  const int64_t saved_shard = meta_int(meta, "shard_numel", path0);
  TS_CHECK(saved_numel == numel_, ValueError, where, ": the checkpoint holds the state of ", saved_numel,
           " parameter elements, this optimizer has ", numel_);
  const std::string saved_opt = meta.count("optimizer") ? meta.at("optimizer") : "";
  TS_CHECK(saved_opt == optimizer_->name(), ValueError, where, ": the checkpoint holds ", saved_opt,
           " state, this optimizer wraps ", optimizer_->name());
  for (int r = 1; r < saved_world; ++r) {
    const std::string p = shard_path(dir, r);
    TS_CHECK(std::filesystem::exists(p), IOError, where, ": the checkpoint was written by ", saved_world,
             " ranks, but shard file ", p, " is missing");
    files.push_back(std::make_unique<SafetensorsFile>(p));
  }
  for (size_t r = 0; r < files.size(); ++r) {
    const std::string p = shard_path(dir, static_cast<int>(r));
    const int64_t step = meta_int(files[r]->metadata(), "step", p);
    TS_CHECK(!expected_step || step == *expected_step, IOError, where, ": shard file ", p, " belongs to step ", step,
             ", the checkpoint to step ", *expected_step, " (a save that did not complete)");
    TS_CHECK(meta_int(files[r]->metadata(), "world_size", p) == saved_world, IOError, where, ": shard file ", p,
             " was written by a run of another world size than ", path0);
  }
  OptimizerStateDict sd;
  sd.param_groups = meta.count("param_groups") ? meta.at("param_groups") : "";
  const int64_t padded = shard_numel_ * world_;
  for (const std::string& key : files[0]->keys()) {
    Tensor t0 = files[0]->get(key);
    if (t0.dim() == 0) {  // a value every rank has ("step")
      sd.state[key] = t0;
      continue;
    }
    TS_CHECK(t0.dim() == 1 && t0.numel() == saved_shard, ValueError, where, ": state '", key, "' has sizes ",
             t0.sizes(), ", expected a shard of ", saved_shard, " elements");
    std::vector<Tensor> parts{t0};
    for (size_t r = 1; r < files.size(); ++r) {
      TS_CHECK(files[r]->contains(key), IOError, where, ": shard ", r, " lacks state '", key, "'");
      parts.push_back(files[r]->get(key));
    }
    Tensor whole = cat(parts).narrow(0, 0, numel_);
    Tensor full_padded = zeros({padded}, TensorOptions(whole.dtype()));
    full_padded.narrow(0, 0, numel_).copy_(whole);
    sd.state[key] = full_padded.narrow(0, shard_offset(), shard_numel_).clone();
  }
  optimizer_->load_state_dict(sd);
}

}  // namespace tessera::optim
