// The reducer of DistributedDataParallel: bucket assignment, the gradient hooks, the in-order start
// of bucket all-reduces, and the end-of-backward callback (the Notes in tessera/distributed/ddp.h).
#include "distributed/ddp_reducer.h"

#include <map>
#include <tuple>

#include "tessera/autograd.h"
#include "tessera/autograd/callbacks.h"
#include "tessera/functions.h"

namespace tessera::nn {

using ::tessera::detail::str_cat;

namespace {

std::string join_names(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i ? ", " : "") + names[i];
  return s;
}

int64_t cap_bytes(double mib) { return static_cast<int64_t>(mib * 1024.0 * 1024.0); }

}  // namespace

DistributedDataParallel::Reducer::Reducer(distributed::ProcessGroup& g, const DistributedDataParallelOptions& o,
                                          const bool& sync, const std::vector<std::pair<std::string, Tensor>>& named)
    : group(g), options(o), require_sync(sync) {
  TS_CHECK(o.bucket_cap_mb > 0 && o.first_bucket_cap_mb > 0, ValueError,
           "DistributedDataParallel: bucket_cap_mb and first_bucket_cap_mb must be positive, got ", o.bucket_cap_mb,
           " and ", o.first_bucket_cap_mb);
  // Reverse order of parameters(); one open bucket per (dtype, device), the first of each with the
  // small cap (Note [DDP buckets]).
  struct Open {
    size_t bucket;
    int64_t bytes;
    bool first;
  };
  std::map<std::tuple<int, std::string>, Open> open;
  std::map<std::tuple<int, std::string>, int> closed_count;
  std::vector<int64_t> bucket_numel;
  for (auto it = named.rbegin(); it != named.rend(); ++it) {
    const Tensor& p = it->second;
    if (!p.requires_grad()) continue;
    const auto key = std::make_tuple(static_cast<int>(p.dtype()), p.device().str());
    auto found = open.find(key);
    if (found == open.end()) {
      buckets.emplace_back();
      bucket_numel.push_back(0);
      found = open.emplace(key, Open{buckets.size() - 1, 0, closed_count[key] == 0}).first;
    }
    Open& ob = found->second;
    Slot s;
    s.param = p;
    s.name = it->first;
    s.bucket = ob.bucket;
    slots.push_back(std::move(s));
    buckets[ob.bucket].slots.push_back(slots.size() - 1);
    bucket_numel[ob.bucket] += p.numel();
    ob.bytes += p.numel() * static_cast<int64_t>(element_size(p.dtype()));
    if (ob.bytes >= cap_bytes(ob.first ? o.first_bucket_cap_mb : o.bucket_cap_mb)) {
      ++closed_count[key];
      open.erase(found);
    }
  }
  for (size_t b = 0; b < buckets.size(); ++b) {
    Bucket& bk = buckets[b];
    const Tensor& first = slots[bk.slots.front()].param;
    bk.buffer = zeros({bucket_numel[b]}, TensorOptions(first.dtype(), first.device()));
    int64_t offset = 0;
    for (size_t i : bk.slots) {
      Slot& s = slots[i];
      s.view = bk.buffer.narrow(0, offset, s.param.numel()).view(s.param.sizes());
      offset += s.param.numel();
    }
    bk.pending = bk.slots.size();
  }
  for (size_t i = 0; i < slots.size(); ++i)
    slots[i].hook = slots[i].param.register_post_accumulate_grad_hook([this, i](const Tensor&) { on_grad_ready(i); });
}

DistributedDataParallel::Reducer::~Reducer() {
  for (Slot& s : slots) s.param.remove_hook(s.hook);
  if (in_iteration) {
    try {
      wait_started();
    } catch (...) {  // a destructor does not raise; the group reports its own failure
    }
  }
}

void DistributedDataParallel::Reducer::fill_slot(Slot& s, const Tensor& grad, bool adopt) {
  NoGradGuard no_grad;
  if (grad.defined() && grad.is_same(s.view)) return;  // accumulated into the bucket already
  if (grad.defined()) s.view.copy_(grad);
  else s.view.zero_();
  if (adopt && options.gradient_as_bucket_view) s.param.set_grad(s.view);
}

void DistributedDataParallel::Reducer::on_grad_ready(size_t i) {
  if (!require_sync) return;  // no_sync(): gradients accumulate locally
  Slot& s = slots[i];
  if (!in_iteration) {
    in_iteration = true;
    started_in_backward = 0;
    autograd::queue_callback([this] { finalize(); });
  }
  TS_CHECK(!s.ready, distributed::DistributedError,
           "DistributedDataParallel: Expected to mark a variable ready only once. This error is caused by one of "
           "the following reasons: 1) Use of a module parameter outside the `forward` function. 2) Reused parameters "
           "in multiple reentrant backward passes. Parameter ", s.name, " got its gradient twice in this iteration.");
  const Tensor& b0 = buckets[s.bucket].buffer;
  TS_CHECK(s.param.dtype() == b0.dtype() && s.param.device() == b0.device(), distributed::DistributedError,
           "DistributedDataParallel: parameter ", s.name, " is ", dtype_name(s.param.dtype()), " on ",
           s.param.device().str(), ", but its gradient bucket was made for ", dtype_name(b0.dtype()), " on ",
           b0.device().str(), ": convert the module (to()) before wrapping it, not after");
  fill_slot(s, s.param.grad(), /*adopt=*/true);
  s.ready = true;
  s.used = true;
  Bucket& b = buckets[s.bucket];
  if (--b.pending == 0) start_ready_buckets(/*from_hook=*/true);
}

void DistributedDataParallel::Reducer::start_ready_buckets(bool from_hook) {
  while (next_bucket < buckets.size() && buckets[next_bucket].pending == 0) {
    Bucket& b = buckets[next_bucket++];
    b.work = group.all_reduce(b.buffer, distributed::ReduceOp::Avg);
    if (from_hook) ++started_in_backward;
  }
}

void DistributedDataParallel::Reducer::wait_started() {
  std::exception_ptr first;
  for (size_t b = 0; b < next_bucket; ++b) {
    if (!buckets[b].work) continue;
    try {
      buckets[b].work->wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
    buckets[b].work.reset();
  }
  if (first) {
    reset();
    std::rethrow_exception(first);
  }
}

void DistributedDataParallel::Reducer::reset() {
  for (Slot& s : slots) s.ready = s.used = false;
  for (Bucket& b : buckets) {
    b.pending = b.slots.size();
    b.work.reset();
  }
  next_bucket = 0;
  last_started_in_backward = started_in_backward;
  in_iteration = false;
}

void DistributedDataParallel::Reducer::finalize() {
  std::vector<std::string> unready;
  for (Slot& s : slots) {
    if (s.ready) continue;
    if (!options.find_unused_parameters) {
      unready.push_back(s.name);
      continue;
    }
    fill_slot(s, s.param.grad(), /*adopt=*/false);  // .grad changes only if some rank used it
    s.ready = true;
    --buckets[s.bucket].pending;
  }
  if (!unready.empty()) {
    // The started reductions complete first, so the ranks stay in step (Note [DDP unused parameters]).
    wait_started();
    reset();
    TS_THROW(distributed::DistributedError,
             "DistributedDataParallel: Expected to have finished reduction in the prior iteration before starting a "
             "new one. This error indicates that your module has parameters that were not used in producing loss. "
             "You can enable unused parameter detection by passing find_unused_parameters=true to "
             "DistributedDataParallel, and by making sure all forward function outputs participate in calculating "
             "loss. Parameters which did not receive grad for rank ", group.rank(), ": ", join_names(unready));
  }
  start_ready_buckets(/*from_hook=*/false);
  wait_started();
  NoGradGuard no_grad;
  if (options.find_unused_parameters) {
    std::vector<double> used(slots.size());
    for (size_t i = 0; i < slots.size(); ++i) used[i] = slots[i].used ? 1.0 : 0.0;
    Tensor map = tensor(used, {static_cast<int64_t>(used.size())}).to(kInt32).to(group.device());
    group.all_reduce(map, distributed::ReduceOp::Max)->wait();
    const std::vector<int> global = map.tolist<int>();
    for (size_t i = 0; i < slots.size(); ++i) {
      Slot& s = slots[i];
      if (s.used || !global[i]) continue;  // used here (set by the hook), or by no rank: left as it was
      if (options.gradient_as_bucket_view) s.param.set_grad(s.view);
      else if (s.param.grad().defined()) s.param.grad().copy_(s.view);
      else s.param.set_grad(s.view.clone());
    }
    if (!options.gradient_as_bucket_view)
      for (Slot& s : slots)
        if (s.used) s.param.grad().copy_(s.view);
  } else if (!options.gradient_as_bucket_view) {
    for (Slot& s : slots) s.param.grad().copy_(s.view);
  }
  reset();
}

void DistributedDataParallel::Reducer::check_finished_previous() {
  if (!in_iteration) return;
  // A backward that raised before its end: its callback was dropped (Note [Final callbacks]).
  std::vector<std::string> unready;
  for (const Slot& s : slots)
    if (!s.ready) unready.push_back(s.name);
  try {
    wait_started();
  } catch (...) {
  }
  reset();
  TS_THROW(distributed::DistributedError,
           "DistributedDataParallel: Expected to have finished reduction in the prior iteration before starting a new "
           "one (the previous backward did not complete). Parameters which did not receive grad for rank ",
           group.rank(), ": ", join_names(unready));
}

}  // namespace tessera::nn
