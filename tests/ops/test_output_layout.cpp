// Note [Output layout] (ops/op_utils.h): elementwise ops, clone() and to() keep the dense layout of the
// first input of the result's shape (channels-last, transposes), as PyTorch's TensorIterator and
// preserve_format; broadcast, gapped or contiguous first inputs give row-major results; contiguous()
// always gives row-major. Values never depend on the layout.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "common/test_util.h"
#include "ops/op_utils.h"
#include "tessera/tessera.h"

namespace ts = tessera;
using namespace tessera::testing;

namespace {

ts::Tensor nhwc(const ts::Shape& s, uint64_t seed) { return test_data(s, ts::kFloat32, seed).contiguous(ts::MemoryFormat::ChannelsLast); }

bool is_cl(const ts::Tensor& t) { return !t.is_contiguous() && t.is_contiguous(ts::MemoryFormat::ChannelsLast); }

TEST(OutputLayout, ElementwiseOpsKeepChannelsLast) {
  const ts::Tensor x = nhwc({2, 3, 4, 5}, 1), y = nhwc({2, 3, 4, 5}, 2);
  const ts::Tensor xr = x.contiguous(), yr = y.contiguous();
  ASSERT_TRUE(is_cl(x));
  for (const auto& [name, got, want] : std::vector<std::tuple<std::string, ts::Tensor, ts::Tensor>>{
           {"relu", ts::relu(x), ts::relu(xr)},
           {"add", x + y, xr + yr},
           {"mul scalar", x * 2.0, xr * 2.0},
           {"sub broadcast second", x - ts::ones({3, 1, 1}), xr - ts::ones({3, 1, 1})},
           {"where", ts::where(x > 0, x, y), ts::where(xr > 0, xr, yr)},
           {"to bf16", x.to(ts::kBFloat16), xr.to(ts::kBFloat16)},
           {"clone", x.clone(), xr.clone()},
       }) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(is_cl(got));
    EXPECT_TRUE(all_close(got, want, tolerance_for(got.dtype())));
  }
  // where's first input is the condition: a channels-last condition decides.
  EXPECT_TRUE(is_cl(ts::where(x > 0, xr, yr)));
}

TEST(OutputLayout, FirstInputOfTheResultShapeDecides) {
  const ts::Tensor cl = nhwc({2, 3, 4, 5}, 3), rm = cl.contiguous();
  EXPECT_TRUE((rm + cl).is_contiguous());  // as torch.add(nchw, channels_last)
  EXPECT_TRUE(is_cl(cl + rm));
  // A broadcast first input does not have the result's shape: the next one decides.
  EXPECT_TRUE(is_cl(ts::ones({3, 1, 1}) + cl));
  EXPECT_TRUE(all_close(ts::ones({3, 1, 1}) + cl, ts::ones({3, 1, 1}) + rm, tolerance_for(ts::kFloat32)));
}

TEST(OutputLayout, TransposesAndPermutationsAreKept) {
  const ts::Tensor a = test_data({6, 7}, ts::kFloat32, 4).t();  // (7, 6), strides (1, 7)
  const ts::Tensor r = ts::exp(a);
  EXPECT_EQ(r.strides(), a.strides());
  EXPECT_TRUE(all_close(r, ts::exp(a.contiguous()), tolerance_for(ts::kFloat32)));
  const ts::Tensor p = test_data({2, 3, 4}, ts::kFloat32, 5).permute({2, 0, 1});
  EXPECT_EQ((p * p).strides(), p.strides());
  EXPECT_EQ(p.clone().strides(), p.strides());
  EXPECT_TRUE(p.contiguous().is_contiguous());
}

TEST(OutputLayout, GapsOverlapsAndBroadcastsGiveRowMajor) {
  const ts::Tensor base = test_data({4, 10}, ts::kFloat32, 6);
  const ts::Tensor stepped = base.slice(1, 0, std::nullopt, 2);  // gaps
  EXPECT_TRUE((stepped + 1.0).is_contiguous());
  EXPECT_TRUE(stepped.clone().is_contiguous());
  const ts::Tensor expanded = test_data({4, 1}, ts::kFloat32, 7).expand({4, 5});  // stride 0
  EXPECT_TRUE(ts::neg(expanded).is_contiguous());
  EXPECT_TRUE(dense_permuted_strides(expanded).empty());
  EXPECT_TRUE(dense_permuted_strides(base).empty());  // contiguous: callers allocate row-major
  EXPECT_EQ(dense_permuted_strides(base.t()), base.t().strides());
}

TEST(OutputLayout, ContiguousIsRowMajorAndGradientsFlow) {
  ts::Tensor x = nhwc({2, 3, 2, 2}, 8).requires_grad_();
  const ts::Tensor c = x.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  ts::Tensor y = (ts::relu(x) * x).sum();
  y.backward();
  ASSERT_TRUE(x.grad().defined());
  const ts::Tensor xd = x.detach();
  EXPECT_TRUE(all_close(x.grad(), ts::where(xd > 0, xd * 2.0, ts::zeros_like(xd)), tolerance_for(ts::kFloat32)));
}

}  // namespace
