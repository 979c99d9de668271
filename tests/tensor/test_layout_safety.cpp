// Crafted layouts against Note [Checked layouts] (src/tensor/tensor_impl.cpp): sizes, strides and
// offsets whose products overflow, or that reach past the storage, raise a clear error; none allocates
// a wrapped size or addresses memory outside its storage.
#include <gtest/gtest.h>

#include "common/test_util.h"

namespace ts = tessera;
using ts::testing::message_of;

namespace {

constexpr int64_t k62 = int64_t{1} << 62;

TEST(LayoutSafety, EmptyStridedWhoseBytesOverflowRaises) {
  // (2 - 1) * (2^62 - 1) + 1 = 2^62 elements of 4 bytes: 2^64 bytes, which wrapped to 0.
  EXPECT_NE(message_of<ts::ValueError>([] { ts::empty_strided({2}, {k62 - 1}); }).find("past the addressable size"),
            std::string::npos);
  EXPECT_NE(message_of<ts::ValueError>([] { ts::empty_strided({3, 3}, {k62, 1}); }).find("overflows int64"),
            std::string::npos);
  EXPECT_NE(message_of<ts::ValueError>([] { ts::empty_strided({2}, {-1}); }).find("negative stride"), std::string::npos);
  EXPECT_NE(message_of<ts::ShapeError>([] { ts::empty_strided({-2}, {1}); }).find("negative size"), std::string::npos);
  // A legitimate strided allocation still works, and its extent is what its strides reach.
  ts::Tensor t = ts::empty_strided({3, 4}, {1, 3});
  EXPECT_EQ(t.strides(), (ts::Shape{1, 3}));
  EXPECT_GE(t.nbytes(), static_cast<size_t>(12 * 4));
}

TEST(LayoutSafety, AsStridedOutsideTheStorageRaises) {
  ts::Tensor base = ts::zeros({16});
  // An offset so large that offset + extent, or its byte count, overflows.
  EXPECT_NE(message_of<ts::IndexError>([&] { base.as_strided({2}, {1}, k62); }).find("reach past the storage"),
            std::string::npos);
  EXPECT_NE(message_of<ts::IndexError>([&] { base.as_strided({2}, {1}, INT64_MAX - 1); }).find("reach past"),
            std::string::npos);
  // Strides whose extent overflows int64.
  EXPECT_NE(message_of<ts::ValueError>([&] { base.as_strided({4, 4}, {k62, k62}); }).find("overflows int64"),
            std::string::npos);
  // Just past the end: 16 floats, the last element at offset 15.
  EXPECT_NE(message_of<ts::IndexError>([&] { base.as_strided({2, 8}, {8, 1}, 1); }).find("reach past"),
            std::string::npos);
  EXPECT_NO_THROW(base.as_strided({2, 8}, {8, 1}, 0));
  EXPECT_NO_THROW(base.as_strided({4}, {0}, 15));  // stride 0 at the last element
  EXPECT_NE(message_of<ts::ValueError>([&] { base.as_strided({2}, {-1}, 4); }).find("negative strides"),
            std::string::npos);
  EXPECT_NE(message_of<ts::ValueError>([&] { base.as_strided({2}, {1}, -1); }).find("negative storage offset"),
            std::string::npos);
  // A view of a view: the offset counts from the storage, not from the view.
  ts::Tensor tail = base.slice(0, 8);
  EXPECT_NO_THROW(tail.as_strided({8}, {1}, 8));
  EXPECT_NE(message_of<ts::IndexError>([&] { tail.as_strided({9}, {1}, 8); }).find("reach past"), std::string::npos);
}

TEST(LayoutSafety, ViewAndExpandOfAbsurdSizesRaise) {
  ts::Tensor x = ts::zeros({4, 4});
  EXPECT_NE(message_of<ts::ValueError>([&] { x.expand({k62, k62, 4, 4}); }).find("overflows int64"), std::string::npos);
  EXPECT_NE(message_of<ts::ValueError>([&] { x.view({k62, 4}); }).find("overflows int64"), std::string::npos);
  EXPECT_NE(message_of<ts::Error>([&] { x.view({-4, -4}); }).find("view"), std::string::npos);
  // A sane expand of a size-1 dim is a view with stride 0, in bounds.
  ts::Tensor row = ts::zeros({1, 4}).expand({1000000, 4});
  EXPECT_EQ(row.stride(0), 0);
}

}  // namespace
