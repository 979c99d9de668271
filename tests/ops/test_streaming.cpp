// Outputs past kStreamBytes take the streaming-store path (Note [Streaming stores]); these tests make
// outputs that large, misaligned by one element, and compare with the float64 computation.
#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {
constexpr int64_t kN = 9 * 1024 * 1024 + 3;  // 36 MiB of float32: past the 32 MiB threshold
}

TEST(StreamingStores, BinaryAndUnaryMatchFloat64) {
  ts::Tensor a = test_data({kN + 1}, ts::kFloat32, 1).slice(0, 1);  // data starts 4 bytes past alignment
  ts::Tensor b = test_data({kN}, ts::kFloat32, 2);
  ts::Tensor out = ts::empty({kN + 1}).slice(0, 1);
  ts::add_out(a, b, out);
  EXPECT_TRUE(all_close(out, ts::add(a.to(ts::kFloat64), b.to(ts::kFloat64))));
  EXPECT_TRUE(all_close(ts::mul(a, b), ts::mul(a.to(ts::kFloat64), b.to(ts::kFloat64))));
  EXPECT_TRUE(all_close(ts::exp(a), ts::exp(a.to(ts::kFloat64))));
  EXPECT_TRUE(all_close(ts::gelu(b), ts::gelu(b.to(ts::kFloat64))));
  ts::Tensor d = test_data({kN / 2}, ts::kFloat64, 3);  // 8-byte elements
  std::vector<double> dv = d.tolist<double>(), got = ts::sub(d, 1.5).tolist<double>();
  ASSERT_EQ(dv.size(), got.size());
  for (size_t i = 0; i < dv.size(); ++i) ASSERT_EQ(got[i], dv[i] - 1.5) << "at " << i;
}
