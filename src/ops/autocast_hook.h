// The autocast stage as the op layer sees it (DESIGN.md "One op call"; the policy lives in src/amp).
//
// Note [Autocast stage]: an op that has an autocast policy (matrix products and convolutions in the
// low precision, softmax / norms / losses / overflow-prone math in float32, mixed-input ops promoted
// to the widest float) opens with
//     if (autocast_pending()) [[unlikely]]
//       if (AutocastArgs c(OpId::mm, {&a, &b}); c) return mm(c[0], c[1]);
// autocast_pending() is one thread-local load: true when autocast is on for some device type on this
// thread and no policy op is running on it. AutocastArgs asks the stage (registered by src/amp at
// start-up) to cast the inputs per the op's entry in the policy table; when the policy applies (the
// op is in the table and autocast is on for the inputs' device type) it returns true and keeps
// autocast excluded on this thread until it is destroyed, so the op called again on the cast inputs
// runs once, as itself, and the ops inside its body are not cast again (PyTorch's autocast dispatch
// key, excluded below the autocast wrapper). Composite ops without a policy (bilinear = two matmuls)
// do not exclude anything, so their parts are policy-checked one by one. The casts are Tensor::to()
// (differentiable; it is no policy op), so gradients reach float32 parameters in float32.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "ops/table/op_table.h"
#include "tessera/tensor.h"

namespace tessera {

class AutocastStage {
 public:
  virtual ~AutocastStage() = default;
  // Replaces the eligible tensors of `inputs` (undefined entries stand for absent optional inputs)
  // by their casts per op's policy. Returns whether the policy applies; false leaves `inputs` alone.
  virtual bool cast_inputs(OpId op, std::vector<Tensor>& inputs) = 0;
};

void set_autocast_stage(AutocastStage* stage);
AutocastStage* autocast_stage();

namespace detail {
// Bits 0..15: bit d set when autocast is on for DeviceType d on this thread (written by src/amp).
// Bits 16..31: how many policy ops run on this thread (each excludes autocast for its body).
extern constinit thread_local uint32_t t_autocast_state;
inline constexpr uint32_t kAutocastExcludeOne = 1u << 16;
}  // namespace detail

// One load and one compare: some device type on, nothing excluded.
inline bool autocast_pending() { return detail::t_autocast_state - 1u < 0xFFFFu; }

// The device-type mask (bits 0..15) of this thread, for src/amp.
uint32_t autocast_device_mask();
void set_autocast_device_mask(uint32_t mask);

// Lifts every exclusion for a scope (the backward engine's, a policy op's), restoring them after:
// activation checkpointing recomputes a forward inside the backward under the forward's autocast.
class AutocastIncludeGuard {
 public:
  AutocastIncludeGuard() : excluded_(detail::t_autocast_state & ~0xFFFFu) { detail::t_autocast_state -= excluded_; }
  ~AutocastIncludeGuard() { detail::t_autocast_state += excluded_; }
  AutocastIncludeGuard(const AutocastIncludeGuard&) = delete;
  AutocastIncludeGuard& operator=(const AutocastIncludeGuard&) = delete;

 private:
  uint32_t excluded_;
};

// Autocast off on this thread for a scope (the body of a policy op; the cast itself).
class AutocastExcludeGuard {
 public:
  AutocastExcludeGuard() { detail::t_autocast_state += detail::kAutocastExcludeOne; }
  ~AutocastExcludeGuard() { detail::t_autocast_state -= detail::kAutocastExcludeOne; }
  AutocastExcludeGuard(const AutocastExcludeGuard&) = delete;
  AutocastExcludeGuard& operator=(const AutocastExcludeGuard&) = delete;
};

// The cast inputs of one policy op call (Note [Autocast stage]). Null pointers stand for absent
// optional inputs and come back as undefined tensors.
class AutocastArgs {
 public:
  AutocastArgs(OpId op, std::initializer_list<const Tensor*> inputs);
  AutocastArgs(OpId op, const std::vector<Tensor>& inputs);
  ~AutocastArgs() {
    if (active_) detail::t_autocast_state -= detail::kAutocastExcludeOne;
  }
  AutocastArgs(const AutocastArgs&) = delete;
  AutocastArgs& operator=(const AutocastArgs&) = delete;

  explicit operator bool() const { return active_; }
  const Tensor& operator[](size_t i) const { return tensors_[i]; }
  // An optional input: nullopt where the caller passed none.
  std::optional<Tensor> opt(size_t i) const {
    return tensors_[i].defined() ? std::optional<Tensor>(tensors_[i]) : std::nullopt;
  }
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  void run(OpId op);
  std::vector<Tensor> tensors_;
  bool active_ = false;
};

}  // namespace tessera
