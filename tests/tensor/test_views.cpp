// Views share storage and compute the layouts PyTorch does; errors name the op.
#include <cmath>

#include "common/test_util.h"

namespace ts = tessera;
using namespace tessera::testing;

TEST(Views, ViewSharesStorage) {
  ts::Tensor a = ts::arange(12).to(ts::kFloat32);
  ts::Tensor b = a.view({3, 4});
  EXPECT_TRUE(b.is_alias_of(a));
  EXPECT_EQ(b.sizes(), (ts::Shape{3, 4}));
  EXPECT_EQ(b.strides(), (ts::Shape{4, 1}));
  b.select(0, 1).fill_(7);
  EXPECT_EQ(a.tolist<float>()[4], 7.0f);
}

TEST(Views, ViewInfersMinusOne) {
  ts::Tensor a = ts::zeros({2, 3, 4});
  EXPECT_EQ(a.view({-1, 4}).sizes(), (ts::Shape{6, 4}));
  EXPECT_THROW(a.view({-1, -1}), ts::ShapeError);
  EXPECT_THROW(a.view({5, 5}), ts::ShapeError);
}

TEST(Views, ViewOnIncompatibleStridesSuggestsReshape) {
  ts::Tensor a = ts::zeros({4, 6}).t();
  try {
    a.view({24});
    FAIL() << "expected ShapeError";
  } catch (const ts::ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("reshape"), std::string::npos) << e.what();
  }
  ts::Tensor r = a.reshape({24});
  EXPECT_FALSE(r.is_alias_of(a));
  EXPECT_EQ(r.sizes(), (ts::Shape{24}));
}

TEST(Views, PermuteTransposeExpand) {
  ts::Tensor a = ts::zeros({2, 3, 4});
  ts::Tensor p = a.permute({2, 0, 1});
  EXPECT_EQ(p.sizes(), (ts::Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (ts::Shape{1, 12, 4}));
  EXPECT_THROW(a.permute({0, 0, 1}), ts::ShapeError);
  EXPECT_THROW(a.permute({0, 1}), ts::ShapeError);
  ts::Tensor e = ts::zeros({3, 1}).expand({2, 3, 5});
  EXPECT_EQ(e.strides(), (ts::Shape{0, 1, 0}));
  EXPECT_THROW(ts::zeros({3, 2}).expand({3, 4}), ts::ShapeError);
  EXPECT_THROW(a.transpose(0, 3), ts::IndexError);
}

TEST(Views, SliceWithStepSelectNarrow) {
  ts::Tensor a = ts::arange(10);
  ts::Tensor s = a.slice(0, 1, 9, 3);  // 1, 4, 7
  EXPECT_EQ(s.tolist<int64_t>(), (std::vector<int64_t>{1, 4, 7}));
  EXPECT_EQ(s.storage_offset(), 1);
  EXPECT_EQ(s.stride(0), 3);
  EXPECT_EQ(a.slice(0, -3).tolist<int64_t>(), (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(a.narrow(0, 2, 3).tolist<int64_t>(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_THROW(a.narrow(0, 8, 3), ts::IndexError);
  EXPECT_THROW(a.select(0, 10), ts::IndexError);
  EXPECT_EQ(a.select(0, -1).item<int64_t>(), 9);
  EXPECT_THROW(a.slice(0, 0, 5, 0), ts::ValueError);
}

TEST(Views, SqueezeUnsqueezeFlattenUnflatten) {
  ts::Tensor a = ts::zeros({2, 1, 3, 1});
  EXPECT_EQ(a.squeeze().sizes(), (ts::Shape{2, 3}));
  EXPECT_EQ(a.squeeze(1).sizes(), (ts::Shape{2, 3, 1}));
  EXPECT_EQ(a.squeeze(0).sizes(), (ts::Shape{2, 1, 3, 1}));
  EXPECT_EQ(a.unsqueeze(-1).sizes(), (ts::Shape{2, 1, 3, 1, 1}));
  EXPECT_EQ(a.flatten().sizes(), (ts::Shape{6}));
  EXPECT_EQ(a.flatten(1, 2).sizes(), (ts::Shape{2, 3, 1}));
  EXPECT_EQ(ts::zeros({6, 4}).unflatten(0, {2, -1}).sizes(), (ts::Shape{2, 3, 4}));
  EXPECT_THROW(ts::zeros({6}).unflatten(0, {4, -1}), ts::ShapeError);
}

TEST(Views, DiagonalAndAsStrided) {
  ts::Tensor a = ts::arange(12).view({3, 4});
  EXPECT_EQ(a.diagonal().tolist<int64_t>(), (std::vector<int64_t>{0, 5, 10}));
  EXPECT_EQ(a.diagonal(1).tolist<int64_t>(), (std::vector<int64_t>{1, 6, 11}));
  EXPECT_EQ(a.diagonal(-1).tolist<int64_t>(), (std::vector<int64_t>{4, 9}));
  ts::Tensor w = a.as_strided({2, 2}, {1, 4}, 1);
  EXPECT_EQ(w.contiguous().tolist<int64_t>(), (std::vector<int64_t>{1, 5, 2, 6}));
  EXPECT_THROW(a.as_strided({4, 4}, {4, 1}), ts::IndexError);  // past the storage
}

TEST(Views, ContiguousCloneAndCopyBetweenDTypes) {
  ts::Tensor a = ts::arange(6).view({2, 3}).t();
  EXPECT_FALSE(a.is_contiguous());
  ts::Tensor c = a.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.tolist<int64_t>(), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  for (ts::DType d : all_dtypes()) {
    ts::Tensor x = a.to(d);
    EXPECT_EQ(x.dtype(), d);
    ts::Tensor back = x.to(ts::kInt64);
    if (d == ts::kBool) EXPECT_EQ(back.tolist<int64_t>(), (std::vector<int64_t>{0, 1, 1, 1, 1, 1}));
    else EXPECT_EQ(back.tolist<int64_t>(), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  }
}

TEST(Views, ScalarAndZeroSize) {
  ts::Tensor s = ts::scalar_tensor(3.5);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.item<double>(), 3.5);
  ts::Tensor z = ts::zeros({0, 3});
  EXPECT_EQ(z.numel(), 0);
  EXPECT_EQ(z.view({3, 0}).sizes(), (ts::Shape{3, 0}));
  EXPECT_THROW(z.item(), ts::ValueError);
  EXPECT_EQ(z.clone().numel(), 0);
}

TEST(Views, MetaDeviceHasShapesOnly) {
  ts::Tensor m = ts::empty({2, 3}, "meta");
  EXPECT_TRUE(m.is_meta());
  EXPECT_EQ(m.t().sizes(), (ts::Shape{3, 2}));
  EXPECT_THROW(m.data_ptr(), ts::DeviceError);
  EXPECT_THROW(m.select(0, 0).select(0, 0).item(), ts::DeviceError);
}

TEST(Views, HalfAndBFloat16RoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 1e-7f, 3.14159f, 1e30f}) {
    EXPECT_EQ(float(ts::Half(float(ts::Half(f)))), float(ts::Half(f)));
    EXPECT_EQ(float(ts::BFloat16(float(ts::BFloat16(f)))), float(ts::BFloat16(f)));
  }
  EXPECT_EQ(float(ts::Half(1.0f)), 1.0f);
  EXPECT_EQ(float(ts::Half(65520.0f)), INFINITY);  // rounds past max
  EXPECT_EQ(float(ts::BFloat16(1.00390625f)), 1.0f);  // ties to even
  EXPECT_EQ(float(ts::Half(5.960464477539063e-08f)), 5.960464477539063e-08f);  // smallest subnormal
}

TEST(TypePromotion, MatchesPyTorch) {
  EXPECT_EQ(ts::promote_types(ts::kInt32, ts::kFloat16), ts::kFloat16);
  EXPECT_EQ(ts::promote_types(ts::kFloat16, ts::kBFloat16), ts::kFloat32);
  EXPECT_EQ(ts::promote_types(ts::kBool, ts::kUInt8), ts::kUInt8);
  EXPECT_EQ(ts::promote_types(ts::kInt64, ts::kFloat32), ts::kFloat32);
  EXPECT_EQ(ts::promote_types(ts::kInt8, ts::kInt64), ts::kInt64);
}

TEST(Errors, NumelOverflowIsValueError) {
  EXPECT_THROW(ts::empty({int64_t(1) << 40, int64_t(1) << 40}), ts::ValueError);
  EXPECT_THROW(ts::empty({int64_t(1) << 62, 4}, "meta"), ts::ValueError);
  EXPECT_THROW(ts::empty({-1, 3}), ts::ShapeError);
}

TEST(Errors, DeviceParsing) {
  EXPECT_EQ(ts::Device("cuda:1").index(), 1);
  EXPECT_EQ(ts::Device("cuda").index(), 0);
  EXPECT_TRUE(ts::Device("meta").is_meta());
  EXPECT_THROW(ts::Device("gpu"), ts::ValueError);
  EXPECT_THROW(ts::Device("cuda:x"), ts::ValueError);
  EXPECT_THROW(ts::Device("cpu:3"), ts::ValueError);
}

TEST(Errors, CudaWithoutBackendIsDeviceError) {
  // Without a GPU (or without the CUDA backend), allocating on one must say so rather than crash.
  if (ts::cuda::is_available()) GTEST_SKIP() << "a GPU is present";
  EXPECT_THROW(ts::empty({2}, "cuda"), ts::DeviceError);
}

TEST(Errors, DataPtrDTypeMismatch) {
  ts::Tensor t = ts::zeros({2});
  EXPECT_THROW(t.data_ptr<double>(), ts::DTypeError);
  EXPECT_NO_THROW(t.data_ptr<float>());
}

TEST(Errors, CopyBroadcastMismatchNamesOp) {
  ts::Tensor a = ts::zeros({3, 4});
  try {
    a.copy_(ts::zeros({3, 5}));
    FAIL();
  } catch (const ts::ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("copy_"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ts::zeros({3}).expand({2, 3}).fill_(1), ts::ValueError);  // writes into an expanded tensor
}

TEST(Views, ViewAsOtherDType) {
  ts::Tensor a = ts::full({2}, 1.0f);
  ts::Tensor b = a.view(ts::kInt32);
  EXPECT_EQ(b.tolist<int32_t>()[0], 0x3f800000);
  EXPECT_THROW(a.view(ts::kFloat64), ts::DTypeError);
}

TEST(Views, SplitChunkUnbind) {
  ts::Tensor a = ts::arange(10);
  auto parts = a.split(4);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].tolist<int64_t>(), (std::vector<int64_t>{8, 9}));
  auto ch = a.chunk(3);
  ASSERT_EQ(ch.size(), 3u);
  EXPECT_EQ(ch[0].numel(), 4);
  EXPECT_THROW(a.split(std::vector<int64_t>{3, 3}), ts::ShapeError);
  EXPECT_EQ(a.view({2, 5}).unbind(1).size(), 5u);
}

TEST(MemoryFormat, ChannelsLastStridesAndContiguity) {
  ts::Tensor x = ts::arange(2 * 3 * 4 * 5).to(ts::kFloat32).reshape({2, 3, 4, 5});
  EXPECT_TRUE(x.is_contiguous(ts::MemoryFormat::Contiguous));
  EXPECT_FALSE(x.is_contiguous(ts::MemoryFormat::ChannelsLast));
  ts::Tensor cl = x.contiguous(ts::MemoryFormat::ChannelsLast);
  EXPECT_EQ(cl.strides(), (ts::Shape{60, 1, 15, 3}));
  EXPECT_TRUE(cl.is_contiguous(ts::MemoryFormat::ChannelsLast));
  EXPECT_FALSE(cl.is_contiguous());
  EXPECT_EQ(cl.tolist<float>(), x.tolist<float>());  // same values, other memory order
  EXPECT_TRUE(cl.contiguous(ts::MemoryFormat::ChannelsLast).is_same(cl));  // already laid out: no copy
  ts::Tensor back = cl.contiguous();
  EXPECT_TRUE(back.is_contiguous());
  EXPECT_EQ(back.tolist<float>(), x.tolist<float>());
  // The permute spelling is the same layout.
  EXPECT_TRUE(x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}).is_contiguous(ts::MemoryFormat::ChannelsLast));
  // Size-1 dims take any stride: (N, C, 1, 1) and (N, 1, H, W) are both layouts at once.
  EXPECT_TRUE(ts::zeros({2, 3, 1, 1}).is_contiguous(ts::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(ts::zeros({2, 1, 4, 5}).is_contiguous(ts::MemoryFormat::ChannelsLast));
  // Only 4-D tensors are channels-last.
  EXPECT_FALSE(ts::zeros({2, 3, 4}).is_contiguous(ts::MemoryFormat::ChannelsLast));
  EXPECT_THROW(ts::zeros({2, 3, 4}).contiguous(ts::MemoryFormat::ChannelsLast), ts::ShapeError);
  // Gradients flow through the copy.
  ts::Tensor leaf = ts::ones({1, 2, 2, 2}).requires_grad_();
  leaf.contiguous(ts::MemoryFormat::ChannelsLast).mul(3.0).sum().backward();
  EXPECT_EQ(leaf.grad().tolist<float>(), std::vector<float>(8, 3.0f));
}
