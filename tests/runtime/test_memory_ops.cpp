// pin_memory / is_pinned / record_stream and the DataLoader's pin_memory option where no GPU is present
// (every CI machine): pinning raises DeviceError, nothing reports itself pinned, record_stream refuses
// CPU tensors, and a loader asked to pin still yields its batches. With a GPU the same calls work; the
// GPU side is tests/cuda/test_runtime.cpp.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "tessera/cuda.h"

namespace ts = tessera;

namespace {

TEST(MemoryOps, PinMemoryWithoutAGpuRaises) {
  ts::Tensor x = ts::arange(6, ts::kFloat32);
  EXPECT_FALSE(x.is_pinned());
  if (ts::cuda::is_available()) {
    ts::Tensor p = x.pin_memory();
    EXPECT_TRUE(p.is_pinned());
    EXPECT_TRUE(ts::testing::all_close(p, x, {0, 0}));
    return;
  }
  try {
    x.pin_memory();
    ADD_FAILURE() << "pin_memory without a GPU did not raise";
  } catch (const ts::DeviceError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("pin_memory"), std::string::npos) << m;
    EXPECT_TRUE(m.find("built without the CUDA backend") != std::string::npos ||
                m.find("no CUDA GPU was found") != std::string::npos)
        << m;
  }
}

TEST(MemoryOps, RecordStreamNeedsACudaTensor) {
  ts::Tensor x = ts::zeros({3});
  EXPECT_THROW(x.record_stream(ts::cuda::Stream()), ts::DeviceError);
  EXPECT_THROW(ts::Tensor().record_stream(ts::cuda::Stream()), ts::ValueError);
  EXPECT_THROW(ts::Tensor().pin_memory(), ts::ValueError);
  EXPECT_FALSE(ts::Tensor().is_pinned());
}

TEST(MemoryOps, DataLoaderPinMemoryIsHarmlessWithoutAGpu) {
  if (ts::cuda::is_available()) GTEST_SKIP() << "a GPU is present: tests/cuda checks the pinned batches";
  ts::data::TensorDataset ds{ts::arange(10, ts::kFloat32), ts::arange(10, ts::kInt64)};
  ts::data::DataLoader loader(ds, {.batch_size = 4, .pin_memory = true});
  int64_t seen = 0;
  for (auto& [x, y] : loader) {
    EXPECT_FALSE(x.is_pinned());
    seen += y.numel();
  }
  EXPECT_EQ(seen, 10);
}

}  // namespace
