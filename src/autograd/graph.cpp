#include "autograd/graph.h"

#include <algorithm>

#include "autograd/accumulate_grad.h"
#include "autograd/view_tracking.h"
#include "tessera/functions.h"

namespace tessera::autograd {
namespace {
std::atomic<uint64_t> g_sequence{0};
std::atomic<uint64_t> g_hook_id{1};
}  // namespace

GraphNode::GraphNode() : sequence_nr_(g_sequence.fetch_add(1, std::memory_order_relaxed)) {}

std::vector<std::shared_ptr<Node>> GraphNode::next_functions() const {
  std::vector<std::shared_ptr<Node>> out;
  for (const Edge& e : next_edges) out.push_back(e.fn);
  return out;
}

AutogradMeta* meta_of(const Tensor& t) {
  if (!t.defined()) return nullptr;
  return static_cast<AutogradMeta*>(t.impl()->autograd_meta.get());
}

AutogradMeta& ensure_meta(const Tensor& t) {
  auto& slot = t.impl()->autograd_meta;
  if (!slot) slot = std::make_unique<AutogradMeta>();
  return static_cast<AutogradMeta&>(*slot);
}

void set_history(AutogradMeta& m, std::shared_ptr<GraphNode> fn, uint32_t output_nr) {
  if (m.retains_grad && m.grad_fn && (m.grad_fn != fn || m.output_nr != output_nr)) {
    auto& old = m.grad_fn->pre_hooks[m.output_nr];
    auto it = std::find_if(old.begin(), old.end(), [&](const auto& p) { return p.first == m.retain_hook_id; });
    if (it != old.end() && fn) {
      fn->pre_hooks[output_nr].push_back(std::move(*it));
      old.erase(it);
    }
  }
  m.requires_grad = true;
  m.grad_fn = std::move(fn);
  m.output_nr = output_nr;
}

uint64_t next_hook_id() { return g_hook_id.fetch_add(1, std::memory_order_relaxed); }

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* m = meta_of(t);
  if (!m) return {};
  if (m->view_base) refresh_view(t, *m);  // Note [View tracking]
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  if (!m->requires_grad) return {};
  std::shared_ptr<GraphNode> acc = m->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    m->grad_accumulator = acc;
  }
  return {acc, 0};
}

std::vector<Tensor> GraphNode::apply_batched(std::vector<Tensor>&& grads, int64_t batch) {
  std::vector<std::vector<Tensor>> samples;
  samples.reserve(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Tensor> g(grads.size());
    for (size_t s = 0; s < grads.size(); ++s)
      if (grads[s].defined()) g[s] = grads[s].select(0, b);
    samples.push_back(apply(std::move(g)));
  }
  return stack_samples(samples);
}

std::vector<Tensor> stack_samples(const std::vector<std::vector<Tensor>>& samples) {
  size_t n = 0;
  for (const auto& s : samples) n = std::max(n, s.size());
  std::vector<Tensor> out(n);
  for (size_t i = 0; i < n; ++i) {
    const Tensor* like = nullptr;
    for (const auto& s : samples)
      if (i < s.size() && s[i].defined()) {
        like = &s[i];
        break;
      }
    if (!like) continue;
    std::vector<Tensor> parts;
    parts.reserve(samples.size());
    for (const auto& s : samples) parts.push_back(i < s.size() && s[i].defined() ? s[i] : zeros_like(*like));
    out[i] = stack(parts, 0);
  }
  return out;
}

Tensor sum_to_batched(const Tensor& grad, const Shape& sizes) {
  const int64_t batch = grad.size(0);
  Shape want = {batch};
  want.insert(want.end(), sizes.begin(), sizes.end());
  if (grad.sizes() == want) return grad;
  const int64_t lead = grad.dim() - 1 - static_cast<int64_t>(sizes.size());
  TS_CHECK(lead >= 0, ShapeError, "autograd: batched gradient of shape ", grad.sizes(), " cannot be reduced to shape ",
           want);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < lead; ++i) dims.push_back(1 + i);
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t g = grad.sizes()[1 + lead + i];
    if (sizes[i] == 1 && g != 1) dims.push_back(1 + lead + static_cast<int64_t>(i));
    else TS_CHECK(sizes[i] == g, ShapeError, "autograd: batched gradient of shape ", grad.sizes(),
                  " does not match the input's shape ", sizes, " (after the batch dim)");
  }
  Tensor r = dims.empty() ? grad : sum(grad, dims, true);
  return r.reshape(want);
}

Tensor sum_to(const Tensor& grad, const Shape& sizes) {
  if (grad.sizes() == sizes) return grad;
  const int64_t lead = grad.dim() - static_cast<int64_t>(sizes.size());
  TS_CHECK(lead >= 0, ShapeError, "autograd: gradient of shape ", grad.sizes(), " cannot be reduced to shape ", sizes);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < lead; ++i) dims.push_back(i);
  for (size_t i = 0; i < sizes.size(); ++i) {
    int64_t g = grad.sizes()[lead + i];
    if (sizes[i] == 1 && g != 1) dims.push_back(lead + static_cast<int64_t>(i));
    else TS_CHECK(sizes[i] == g, ShapeError, "autograd: gradient of shape ", grad.sizes(),
                  " does not match the input's shape ", sizes);
  }
  Tensor r = dims.empty() ? grad : sum(grad, dims, true);
  return r.reshape(sizes);
}

}  // namespace tessera::autograd
