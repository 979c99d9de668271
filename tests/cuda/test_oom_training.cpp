// Out of GPU memory inside a training step (issue "faults that lose nothing"): with the process capped
// at 2 GiB, a step at a batch whose activations cannot fit raises OutOfMemoryError carrying the
// allocator's summary (what was asked, what tessera holds and what is reserved); the step's tensors
// are freed as the exception unwinds, and the same model and optimizer then train at a smaller batch.
// Without a GPU the test skips.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/test_util.h"
#include "tessera/cuda.h"
#include "tessera/tessera.h"

namespace ts = tessera;
namespace cuda = tessera::cuda;

namespace {

// Restores the whole device to the process and returns the cache, whatever the test did.
struct CapGuard {
  explicit CapGuard(double fraction) {
    cuda::empty_cache();
    cuda::set_per_process_memory_fraction(fraction);
  }
  ~CapGuard() {
    cuda::set_per_process_memory_fraction(1.0);
    cuda::empty_cache();
  }
};

}  // namespace

TEST(CudaOomTraining, AStepThatDoesNotFitRaisesAndASmallerBatchThenTrains) {
  TS_REQUIRE_GPU();
  const double total = static_cast<double>(cuda::get_device_properties(cuda::current_device()).total_memory);
  const double cap = 2.0 * 1024 * 1024 * 1024;
  CapGuard guard(cap / total);

  ts::manual_seed(0);
  const ts::TensorOptions on_gpu(ts::kFloat32, ts::Device::cuda());
  ts::models::MLP model(256, {4096, 4096}, 10);  // ~18M parameters: ~290 MB with grads and AdamW's state
  model.to(ts::Device::cuda());
  ts::optim::AdamW opt(model.parameters(), {.lr = 1e-3});
  auto step = [&](int64_t batch) {
    ts::Tensor x = ts::randn({batch, 256}, on_gpu);
    ts::Tensor y = ts::randint(0, 10, {batch}, ts::TensorOptions(ts::kInt64, ts::Device::cuda()));
    opt.zero_grad(true);
    ts::Tensor loss = ts::nn::functional::cross_entropy(model(x), y);
    loss.backward();
    opt.step();
    return loss.item<double>();
  };
  EXPECT_TRUE(std::isfinite(step(64)));  // the optimizer's state exists before the failing step

  // 200,000 x 4096 float activations are 3.3 GB per layer: past the 2 GiB cap, in the forward.
  try {
    step(200000);
    ADD_FAILURE() << "a step at batch 200000 under a 2 GiB cap did not raise";
  } catch (const ts::OutOfMemoryError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("CUDA out of memory. Tried to allocate "), std::string::npos) << m;
    EXPECT_NE(m.find(" is allocated by tessera, and "), std::string::npos) << m;
    EXPECT_NE(m.find("is reserved by tessera but unallocated"), std::string::npos) << m;
  }
  // The failed step's tensors went with the exception: what is allocated is the model, its gradients
  // and the optimizer's state, well under the cap.
  opt.zero_grad(true);
  cuda::empty_cache();
  EXPECT_LT(static_cast<double>(cuda::memory_allocated()), 0.5 * cap);

  // The program continues at a smaller batch, and learns (one fixed batch, a few steps).
  ts::manual_seed(1);
  double first = 0, last = 0;
  ts::Tensor x = ts::randn({512, 256}, on_gpu);
  ts::Tensor y = ts::randint(0, 10, {512}, ts::TensorOptions(ts::kInt64, ts::Device::cuda()));
  for (int i = 0; i < 5; ++i) {
    opt.zero_grad(true);
    ts::Tensor loss = ts::nn::functional::cross_entropy(model(x), y);
    loss.backward();
    opt.step();
    (i == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_TRUE(std::isfinite(last));
  EXPECT_LT(last, first);
  EXPECT_LE(static_cast<double>(cuda::max_memory_reserved()), cap * 1.01);
}
