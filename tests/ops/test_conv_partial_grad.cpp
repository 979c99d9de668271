// Convolution gradients smaller than the conv2d output (conv_transpose2d's output_padding, or a caller's
// narrowed gradient): the missing rows and columns count as zeros, on every kernel size, including the
// 1x1 kernel whose patches are the image itself when the sizes agree.
#include "common/test_util.h"
#include "ops/conv_ops.h"

namespace ts = tessera;

TEST(ConvPartialGrad, WeightGradientOfANarrowedGradientEqualsTheZeroPaddedOne) {
  for (int64_t k : {1, 3}) {
    for (ts::DType dt : {ts::kFloat64, ts::kFloat32}) {
      SCOPED_TRACE("kernel " + std::to_string(k) + " " + ts::dtype_name(dt));
      const int64_t pad = k / 2;
      ts::Tensor x = ts::testing::test_data({3, 8, 6, 7}, dt, 1);
      ts::Tensor g = ts::testing::test_data({3, 16, 5, 6}, dt, 2);
      ts::Tensor padded = ts::zeros({3, 16, 6, 7}, dt);
      padded.narrow(2, 0, 5).narrow(3, 0, 6).copy_(g);
      ts::Tensor narrow = ts::conv2d_backward_weight(g, x, {k, k}, 1, pad, 1, 1);
      ts::Tensor full = ts::conv2d_backward_weight(padded, x, {k, k}, 1, pad, 1, 1);
      EXPECT_TRUE(ts::testing::all_close(narrow, full));
    }
  }
}

TEST(ConvPartialGrad, ConvTranspose1x1WithOutputPaddingMatchesTheExplicitSum) {
  // conv_transpose2d with a 1x1 kernel, stride 2 and output_padding 1 leaves the last row and column
  // of the output untouched by the input (they get only the bias): compared against the definition.
  ts::Tensor x = ts::testing::test_data({2, 4, 3, 3}, ts::kFloat64, 3);
  ts::Tensor w = ts::testing::test_data({4, 5, 1, 1}, ts::kFloat64, 4);
  ts::Tensor y = ts::conv_transpose2d(x, w, std::nullopt, 2, 0, 1);
  ASSERT_EQ(y.sizes(), ts::Shape({2, 5, 6, 6}));
  ts::Tensor want = ts::zeros({2, 5, 6, 6}, ts::kFloat64);
  // y[n, o, 2i, 2j] = sum_c x[n, c, i, j] * w[c, o]
  ts::Tensor core = ts::einsum("ncij,co->noij", {x, w.flatten(1)});
  want.slice(2, 0, 6, 2).slice(3, 0, 6, 2).copy_(core);
  EXPECT_TRUE(ts::testing::all_close(y, want));
}
