// Fake data: storages without memory and kernels that do not run, while the compiler traces a pass
// whose values it does not need (DESIGN.md "The compiler").
//
// Note [Fake data]: the backward of a joint graph is captured by running the engine once over the
// forward's autograd graph (Note [Joint graph] in compile/capture.h). Only the trace is kept, never
// the gradients, so the capture runs that pass with fake data: a storage made on the thread has its
// size, device and version counter but no memory (Storage::fake()), and kernel slots return without
// running (KernelSlot::operator(), ops/kernel_slot.h). Sizes, strides and dtypes come from the ops'
// own shape logic, as they do for real tensors, so the trace is the one a real pass records. Reading
// a fake tensor's data (data_ptr(), item(), printing) raises; the capture then traces the pass again
// with real data, so a derivative that reads data on the host behaves as it did before. Saved forward
// values and the placeholder output gradients are real (made before the scope opens). What it saves:
// the backward's compute and its memory (every gradient, every intermediate) at the first call.
#pragma once

namespace tessera::detail {

extern thread_local bool t_fake_data;  // defined in storage.cpp

// Opens fake data on this thread for its lifetime (nests: restores what it found).
class FakeDataScope {
 public:
  FakeDataScope() : prev_(t_fake_data) { t_fake_data = true; }
  ~FakeDataScope() { t_fake_data = prev_; }
  FakeDataScope(const FakeDataScope&) = delete;
  FakeDataScope& operator=(const FakeDataScope&) = delete;

 private:
  bool prev_;
};

}  // namespace tessera::detail
