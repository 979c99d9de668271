// Crafted layouts against Note [Checked layouts] (src/tensor/tensor_impl.cpp): sizes, strides and
// offsets whose products overflow, or that reach past the storage, raise a clear error; none allocates
// a wrapped size or addresses memory outside its storage.
#include <gtest/gtest.h>

#include <map>

#include "common/test_util.h"
#include "tessera/safetensors.h"

namespace ts = tessera;
using ts::testing::message_of;

namespace {

constexpr int64_t k62 = int64_t{1} << 62;

TEST(LayoutSafety, EmptyStridedWhoseBytesOverflowRaises) {
  // (2 - 1) * (2^62 - 1) + 1 = 2^62 elements of 4 bytes: 2^64 bytes, which wrapped to 0.
  EXPECT_NE(message_of<ts::ValueError>([] { ts::empty_strided({2}, {k62 - 1}); }).find(
                "empty_strided: Storage size calculation overflowed with sizes=[2] and strides=[4611686018427387903]"),
            std::string::npos);
  EXPECT_NE(message_of<ts::ValueError>([] { ts::empty_strided({3, 3}, {k62, 1}); }).find("Storage size calculation overflowed"),
            std::string::npos);
  EXPECT_NE(message_of<ts::ValueError>([] { ts::empty_strided({2}, {-1}); }).find("Negative strides are not supported"), std::string::npos);
  EXPECT_NE(message_of<ts::ShapeError>([] { ts::empty_strided({-2}, {1}); }).find("negative size"), std::string::npos);
  // A legitimate strided allocation still works, and its extent is what its strides reach.
  ts::Tensor t = ts::empty_strided({3, 4}, {1, 3});
  EXPECT_EQ(t.strides(), (ts::Shape{1, 3}));
  EXPECT_GE(t.nbytes(), static_cast<size_t>(12 * 4));
}

TEST(LayoutSafety, AsStridedOutsideTheStorageRaises) {
  ts::Tensor base = ts::zeros({16});
  // An offset so large that offset + extent, or its byte count, overflows.
  EXPECT_NE(message_of<ts::IndexError>([&] { base.as_strided({2}, {1}, k62); }).find("are out of bounds for storage of size 64"),
            std::string::npos);
  EXPECT_NE(message_of<ts::IndexError>([&] { base.as_strided({2}, {1}, INT64_MAX - 1); }).find("out of bounds"),
            std::string::npos);
  // Strides whose extent overflows int64.
  EXPECT_NE(message_of<ts::ValueError>([&] { base.as_strided({4, 4}, {k62, k62}); })
                .find("Storage size calculation overflowed with sizes=[4, 4] and strides=[4611686018427387904, "
                      "4611686018427387904]"),
            std::string::npos);
  // Just past the end: 16 floats, the last element at offset 15.
  // PyTorch's wording, with the bytes the layout needs.
  EXPECT_NE(message_of<ts::IndexError>([&] { base.as_strided({2, 8}, {8, 1}, 1); })
                .find("sizes [2, 8], strides [8, 1], storage offset 1, and itemsize 4 requiring a storage size of 68 "
                      "are out of bounds for storage of size 64"),
            std::string::npos);
  EXPECT_NO_THROW(base.as_strided({2, 8}, {8, 1}, 0));
  EXPECT_NO_THROW(base.as_strided({4}, {0}, 15));  // stride 0 at the last element
  EXPECT_NE(message_of<ts::ValueError>([&] { base.as_strided({2}, {-1}, 4); }).find(
                "as_strided: Negative strides are not supported at the moment, got strides: [-1]"),
            std::string::npos);
  EXPECT_NE(message_of<ts::ValueError>([&] { base.as_strided({2}, {1}, -1); }).find("as_strided: invalid storage offset -1"),
            std::string::npos);
  // A view of a view: the offset counts from the storage, not from the view.
  ts::Tensor tail = base.slice(0, 8);
  EXPECT_NO_THROW(tail.as_strided({8}, {1}, 8));
  EXPECT_NE(message_of<ts::IndexError>([&] { tail.as_strided({9}, {1}, 8); }).find("out of bounds"), std::string::npos);
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

// The safetensors reader's tensors view the file's mapping through set_layout: in bounds, and the
// last byte of a tensor that ends the file is readable.
TEST(LayoutSafety, SafetensorsViewsAreBoundsChecked) {
  std::map<std::string, ts::Tensor> in = {{"a", ts::arange(5, ts::kFloat32)}, {"b", ts::arange(3, ts::kInt64)}};
  const std::string buf = ts::serialize_safetensors(in);
  auto out = ts::deserialize_safetensors(buf);
  EXPECT_TRUE(ts::equal(out.at("a"), in.at("a")));
  EXPECT_EQ(out.at("b")[2].item<int64_t>(), 2);
  // A header whose data_offsets run one byte past the buffer is refused, not viewed.
  std::string cut = buf.substr(0, buf.size() - 1);
  EXPECT_THROW(ts::deserialize_safetensors(cut), ts::IOError);
}
