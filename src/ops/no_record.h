// NoRecordScope: grad mode off for the body of an op that records itself (Note [Autograd stage]).
// The views, casts and copies such a body takes of its inputs are implementation, not steps to
// differentiate; recording them would only build graph nodes that nobody runs. The op decides
// should_record() before the scope opens and calls record_op() once it is closed.
#pragma once
#include "ops/autograd_hook.h"
#include "runtime/grad_mode.h"

namespace tessera {

// `active` is the op's should_record(): a call that records nothing leaves grad mode alone.
class NoRecordScope {
 public:
  NoRecordScope() : NoRecordScope(true) {}
  explicit NoRecordScope(bool active) : active_(active), prev_(is_grad_enabled()) {
    if (!active_) return;
    set_grad_enabled(false);
    ++detail::t_trace_suppress;  // Note [Trace records]: the op is one record
  }
  ~NoRecordScope() {
    if (!active_) return;
    set_grad_enabled(prev_);
    --detail::t_trace_suppress;
  }
  NoRecordScope(const NoRecordScope&) = delete;
  NoRecordScope& operator=(const NoRecordScope&) = delete;

 private:
  bool active_, prev_;
};

// The attrs of a recorded call, spelled out rather than designated (no member left uninitialised).
inline OpAttrs make_attrs(std::vector<int64_t> ints, std::vector<Tensor> tensors = {}) {
  OpAttrs a;
  a.ints = std::move(ints);
  a.tensors = std::move(tensors);
  return a;
}

}  // namespace tessera
