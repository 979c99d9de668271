// The data layer's file readers: read_idx / write_idx on raw and gzip IDX files written here byte by
// byte (gzip through zlib directly, not through the code under test), their IOErrors on missing,
// corrupt and truncated files, the MNIST / FashionMNIST datasets on a small synthetic directory and,
// where Debian's dataset-fashion-mnist is installed, on the real data; TextByteDataset windows.
#include <gmock/gmock.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/test_util.h"

namespace ts = tessera;
namespace fs = std::filesystem;
using namespace tessera::testing;
using ::testing::HasSubstr;
using Bytes = std::vector<uint8_t>;

namespace {

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("tessera_data_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

void write_raw(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good());
}

void write_gz(const std::string& path, const Bytes& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  }
  ASSERT_EQ(gzclose(f), Z_OK);
}

Bytes read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

Bytes gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  Bytes out;
  uint8_t buf[4096];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.insert(out.end(), buf, buf + n);
  gzclose(f);
  return out;
}

void put_be32(Bytes& b, uint32_t v) {
  for (int k = 3; k >= 0; --k) b.push_back(static_cast<uint8_t>(v >> (8 * k)));
}

// An IDX header: magic 0x0000TTNN and the dims.
Bytes idx_header(uint8_t code, const std::vector<uint32_t>& dims) {
  Bytes b{0, 0, code, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) put_be32(b, d);
  return b;
}

template <class T>
void append_be(Bytes& b, T value) {
  uint8_t raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));
  for (int k = sizeof(T) - 1; k >= 0; --k) b.push_back(raw[k]);  // the host is little-endian
}

// Runs `fn`, expecting an IOError whose message contains every one of `parts`.
void expect_io_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an IOError";
  } catch (const ts::IOError& e) {
    for (const std::string& p : parts) EXPECT_THAT(e.what(), HasSubstr(p));
  }
}

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

}  // namespace

// ---- IDX ----------------------------------------------------------------------------------------

TEST(Idx, ReadsHandWrittenRawFilesOfEveryType) {
  TempDir dir;
  {
    Bytes b = idx_header(0x08, {2, 3, 4});
    for (int i = 0; i < 24; ++i) b.push_back(static_cast<uint8_t>(i * 10));
    write_raw(dir.file("u8"), b);
    ts::Tensor t = ts::data::read_idx(dir.file("u8"));
    EXPECT_EQ(t.dtype(), ts::kUInt8);
    EXPECT_EQ(t.sizes(), (ts::Shape{2, 3, 4}));
    EXPECT_TRUE(all_close(t, (ts::arange(24, ts::kInt64) * 10).to(ts::kUInt8).view({2, 3, 4})));
  }
  {
    Bytes b = idx_header(0x09, {3});
    for (int8_t v : {int8_t{-128}, int8_t{-1}, int8_t{127}}) b.push_back(static_cast<uint8_t>(v));
    write_raw(dir.file("i8"), b);
    ts::Tensor t = ts::data::read_idx(dir.file("i8"));
    EXPECT_EQ(t.dtype(), ts::kInt8);
    EXPECT_EQ(t.tolist<int64_t>(), (std::vector<int64_t>{-128, -1, 127}));
  }
  {
    Bytes b = idx_header(0x0B, {2, 2});
    for (int16_t v : {int16_t{-32768}, int16_t{-2}, int16_t{300}, int16_t{32767}}) append_be(b, v);
    write_raw(dir.file("i16"), b);
    ts::Tensor t = ts::data::read_idx(dir.file("i16"));
    EXPECT_EQ(t.dtype(), ts::kInt32);  // widened: tessera has no int16
    EXPECT_EQ(t.sizes(), (ts::Shape{2, 2}));
    EXPECT_EQ(t.tolist<int64_t>(), (std::vector<int64_t>{-32768, -2, 300, 32767}));
  }
  {
    Bytes b = idx_header(0x0C, {3});
    for (int32_t v : {int32_t{-70000}, int32_t{1}, int32_t{2000000000}}) append_be(b, v);
    write_raw(dir.file("i32"), b);
    EXPECT_EQ(ts::data::read_idx(dir.file("i32")).tolist<int64_t>(), (std::vector<int64_t>{-70000, 1, 2000000000}));
  }
  {
    Bytes b = idx_header(0x0D, {1, 3});
    for (float v : {1.5f, -2.0f, 3.25e-3f}) append_be(b, v);
    write_raw(dir.file("f32"), b);
    ts::Tensor t = ts::data::read_idx(dir.file("f32"));
    EXPECT_EQ(t.dtype(), ts::kFloat32);
    EXPECT_EQ(t.tolist<float>(), (std::vector<float>{1.5f, -2.0f, 3.25e-3f}));
  }
  {
    Bytes b = idx_header(0x0E, {2});
    for (double v : {0.1, -1e300}) append_be(b, v);
    write_raw(dir.file("f64"), b);
    EXPECT_EQ(ts::data::read_idx(dir.file("f64")).tolist<double>(), (std::vector<double>{0.1, -1e300}));
  }
  {
    write_raw(dir.file("empty"), idx_header(0x08, {0, 28}));  // a zero-size tensor is valid
    EXPECT_EQ(ts::data::read_idx(dir.file("empty")).sizes(), (ts::Shape{0, 28}));
  }
}

TEST(Idx, ReadsGzipFilesWrittenWithZlib) {
  TempDir dir;
  Bytes b = idx_header(0x0D, {4, 5});
  for (int i = 0; i < 20; ++i) append_be(b, static_cast<float>(i) * 0.5f - 3.0f);
  write_gz(dir.file("x.idx.gz"), b);
  write_gz(dir.file("no_suffix"), b);  // recognized by content, not by name
  ts::Tensor want = (ts::arange(20, ts::kFloat32) * 0.5 - 3.0).view({4, 5});
  EXPECT_TRUE(all_close(ts::data::read_idx(dir.file("x.idx.gz")), want, {0, 0}));
  EXPECT_TRUE(all_close(ts::data::read_idx(dir.file("no_suffix")), want, {0, 0}));
}

TEST(Idx, WriteIdxProducesTheFormatRawAndGzip) {
  TempDir dir;
  ts::Tensor t = ts::tensor(std::vector<int32_t>{1, -2, 65536, 7, 8, 9}, {2, 3}, ts::kInt32);
  Bytes want = idx_header(0x0C, {2, 3});
  for (int32_t v : {1, -2, 65536, 7, 8, 9}) append_be(want, v);
  ts::data::write_idx(dir.file("t.idx"), t);
  EXPECT_EQ(read_file(dir.file("t.idx")), want);
  // A transposed (non-contiguous) tensor is written in its logical order.
  ts::data::write_idx(dir.file("tt.idx.gz"), t.t());
  Bytes gz = read_file(dir.file("tt.idx.gz"));
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(gz[0], 0x1f);  // gzip magic
  EXPECT_EQ(gz[1], 0x8b);
  Bytes want_t = idx_header(0x0C, {3, 2});
  for (int32_t v : {1, 7, -2, 8, 65536, 9}) append_be(want_t, v);
  EXPECT_EQ(gunzip(dir.file("tt.idx.gz")), want_t);
}

TEST(Idx, RoundTripsEveryWritableDtype) {
  TempDir dir;
  for (ts::DType dt : {ts::kUInt8, ts::kInt8, ts::kInt32, ts::kFloat32, ts::kFloat64}) {
    ts::Tensor t = test_data({3, 4, 5}, dt, 7, 0, 100);
    for (const char* name : {"rt.idx", "rt.idx.gz"}) {
      ts::data::write_idx(dir.file(name), t);
      ts::Tensor back = ts::data::read_idx(dir.file(name));
      EXPECT_EQ(back.dtype(), dt) << name;
      EXPECT_TRUE(all_close(back, t, {0, 0})) << name << " " << ts::dtype_name(dt);
    }
  }
  EXPECT_THROW(ts::data::write_idx(dir.file("b.idx"), ts::zeros({2}, ts::kInt64)), ts::DTypeError);
}

TEST(Idx, MissingFileRaisesIOErrorNamingIt) {
  TempDir dir;
  const std::string p = dir.file("nope-idx1-ubyte");
  expect_io_error([&] { ts::data::read_idx(p); }, {p, "No such file"});
  expect_io_error([&] { ts::data::read_idx(dir.str()); }, {dir.str(), "directory"});
}

TEST(Idx, BadMagicRaisesIOError) {
  TempDir dir;
  Bytes bad_zero = {1, 0, 0x08, 1, 0, 0, 0, 1, 42};
  write_raw(dir.file("a"), bad_zero);
  expect_io_error([&] { ts::data::read_idx(dir.file("a")); }, {dir.file("a"), "bad magic number 0x01000801"});
  Bytes bad_type = {0, 0, 0x07, 1, 0, 0, 0, 1, 42};
  write_raw(dir.file("b"), bad_type);
  expect_io_error([&] { ts::data::read_idx(dir.file("b")); }, {dir.file("b"), "bad magic number"});
  write_gz(dir.file("c.gz"), bad_type);
  expect_io_error([&] { ts::data::read_idx(dir.file("c.gz")); }, {dir.file("c.gz"), "bad magic number"});
  write_raw(dir.file("short"), Bytes{0, 0});
  expect_io_error([&] { ts::data::read_idx(dir.file("short")); }, {dir.file("short"), "truncated"});
}

TEST(Idx, DimsThatDisagreeWithTheDataRaiseIOError) {
  TempDir dir;
  Bytes b = idx_header(0x08, {4, 3});
  for (int i = 0; i < 12; ++i) b.push_back(static_cast<uint8_t>(i));
  Bytes truncated(b.begin(), b.end() - 1);
  Bytes trailing = b;
  trailing.push_back(99);
  Bytes cut_header(b.begin(), b.begin() + 6);  // the dims themselves end early

  write_raw(dir.file("t"), truncated);
  expect_io_error([&] { ts::data::read_idx(dir.file("t")); }, {dir.file("t"), "truncated", "[4, 3]"});
  write_raw(dir.file("x"), trailing);
  expect_io_error([&] { ts::data::read_idx(dir.file("x")); }, {dir.file("x"), "disagree with the file size"});
  write_raw(dir.file("h"), cut_header);
  expect_io_error([&] { ts::data::read_idx(dir.file("h")); }, {dir.file("h"), "truncated"});

  write_gz(dir.file("t.gz"), truncated);
  expect_io_error([&] { ts::data::read_idx(dir.file("t.gz")); }, {dir.file("t.gz"), "truncated", "[4, 3]"});
  write_gz(dir.file("x.gz"), trailing);
  expect_io_error([&] { ts::data::read_idx(dir.file("x.gz")); }, {dir.file("x.gz"), "more data than its dims"});
  write_gz(dir.file("h.gz"), cut_header);
  expect_io_error([&] { ts::data::read_idx(dir.file("h.gz")); }, {dir.file("h.gz"), "truncated"});
  // Dims claiming far more data than a small gzip file can expand to: refused before allocating.
  write_gz(dir.file("huge.gz"), idx_header(0x0E, {1u << 30, 1u << 30}));
  expect_io_error([&] { ts::data::read_idx(dir.file("huge.gz")); }, {dir.file("huge.gz"), "corrupt"});
}

TEST(Idx, DamagedGzipStreamsRaiseIOError) {
  TempDir dir;
  Bytes b = idx_header(0x08, {64, 64});
  for (int i = 0; i < 64 * 64; ++i) b.push_back(static_cast<uint8_t>((i * 7919) % 251));
  write_gz(dir.file("ok.gz"), b);
  ASSERT_EQ(ts::data::read_idx(dir.file("ok.gz")).numel(), 64 * 64);
  const Bytes gz = read_file(dir.file("ok.gz"));

  // Cut mid-stream: zlib reports an unexpected end of file.
  write_raw(dir.file("cut.gz"), Bytes(gz.begin(), gz.begin() + static_cast<long>(gz.size() / 2)));
  expect_io_error([&] { ts::data::read_idx(dir.file("cut.gz")); }, {dir.file("cut.gz")});
  // The last 8 bytes are the CRC32 and length trailer: a wrong CRC is caught even though all the data
  // decompresses.
  Bytes bad_crc = gz;
  bad_crc[bad_crc.size() - 8] ^= 0xFF;
  write_raw(dir.file("crc.gz"), bad_crc);
  expect_io_error([&] { ts::data::read_idx(dir.file("crc.gz")); }, {dir.file("crc.gz"), "gzip"});
  // Garbage in the deflate data.
  Bytes garbage = gz;
  for (size_t i = 20; i < 60 && i < garbage.size() - 8; ++i) garbage[i] = 0xFF;
  write_raw(dir.file("garbage.gz"), garbage);
  expect_io_error([&] { ts::data::read_idx(dir.file("garbage.gz")); }, {dir.file("garbage.gz")});
}

// Truncated and corrupt files, cut at every few bytes: an IOError naming the file and the offset where
// the data stops or goes wrong, never a short tensor or a crash.
TEST(Idx, TruncatedFilesNameTheFileAndTheOffset) {
  TempDir dir;
  Bytes b = idx_header(0x0D, {8, 5});
  for (int i = 0; i < 8 * 5 * 4; ++i) b.push_back(static_cast<uint8_t>((i * 31) % 256));
  for (size_t cut = 0; cut < b.size(); cut += 7) {
    SCOPED_TRACE("raw cut at " + std::to_string(cut));
    write_raw(dir.file("cut.idx"), Bytes(b.begin(), b.begin() + static_cast<long>(cut)));
    expect_io_error([&] { ts::data::read_idx(dir.file("cut.idx")); }, {dir.file("cut.idx"), "offset"});
  }
  write_gz(dir.file("ok.gz"), b);
  const Bytes gz = read_file(dir.file("ok.gz"));
  for (size_t cut = 0; cut + 1 < gz.size(); cut += 5) {
    SCOPED_TRACE("gzip cut at " + std::to_string(cut));
    write_raw(dir.file("cut.gz"), Bytes(gz.begin(), gz.begin() + static_cast<long>(cut)));
    expect_io_error([&] { ts::data::read_idx(dir.file("cut.gz")); }, {dir.file("cut.gz"), "offset"});
  }
  // Trailing data after what the dims account for: the offset where it starts.
  Bytes longer = b;
  longer.push_back(0);
  write_raw(dir.file("long.idx"), longer);
  expect_io_error([&] { ts::data::read_idx(dir.file("long.idx")); },
                  {dir.file("long.idx"), "past offset " + std::to_string(b.size())});
  // A flipped byte in the deflate data or the trailer: the offset in the decompressed data.
  for (size_t at : {size_t{12}, gz.size() - 6}) {
    Bytes bad = gz;
    bad[at] ^= 0x55;
    write_raw(dir.file("bad.gz"), bad);
    try {
      (void)ts::data::read_idx(dir.file("bad.gz"));  // a flip deflate cannot notice is caught by the CRC
      ADD_FAILURE() << "no error for a flipped byte at " << at;
    } catch (const ts::IOError& e) {
      EXPECT_THAT(e.what(), HasSubstr(dir.file("bad.gz")));
      EXPECT_THAT(e.what(), HasSubstr("offset"));
    }
  }
}

TEST(TextBytes, TruncatedGzipNamesTheFileAndTheOffset) {
  TempDir dir;
  Bytes bytes;
  for (int i = 0; i < 5000; ++i) bytes.push_back(static_cast<uint8_t>((i * 7) % 251));
  write_gz(dir.file("t.gz"), bytes);
  const Bytes gz = read_file(dir.file("t.gz"));
  for (size_t cut = 10; cut + 1 < gz.size(); cut += gz.size() / 7) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    write_raw(dir.file("cut.gz"), Bytes(gz.begin(), gz.begin() + static_cast<long>(cut)));
    expect_io_error([&] { ts::data::TextByteDataset t(dir.file("cut.gz"), 8); },
                    {"TextByteDataset", dir.file("cut.gz"), "offset"});
  }
}

// ---- MNIST layout -------------------------------------------------------------------------------

namespace {

// A small MNIST-layout directory: `n` images of 4x3 pixels; images raw, labels gzip-compressed.
void write_mnist(const TempDir& dir, const std::string& prefix, uint32_t n) {
  Bytes images = idx_header(0x08, {n, 4, 3});
  for (uint32_t i = 0; i < n * 12; ++i) images.push_back(static_cast<uint8_t>((i * 37) % 256));
  write_raw(dir.file(prefix + "-images-idx3-ubyte"), images);
  Bytes labels = idx_header(0x08, {n});
  for (uint32_t i = 0; i < n; ++i) labels.push_back(static_cast<uint8_t>((i * 3) % 10));
  write_gz(dir.file(prefix + "-labels-idx1-ubyte.gz"), labels);
}

}  // namespace

TEST(Mnist, ReadsTheLayoutAsFloatImagesAndInt64Labels) {
  TempDir dir;
  write_mnist(dir, "train", 6);
  write_mnist(dir, "t10k", 2);
  ts::data::MNIST train(dir.str(), ts::data::Split::Train);
  ts::data::MNIST test(dir.str(), ts::data::Split::Test);
  EXPECT_EQ(train.size(), 6);
  EXPECT_EQ(test.size(), 2);
  ts::data::Example ex = train.get(4);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex.data().dtype(), ts::kFloat32);
  EXPECT_EQ(ex.data().sizes(), (ts::Shape{1, 4, 3}));
  std::vector<double> want;
  for (int i = 0; i < 12; ++i) want.push_back(static_cast<float>(((4 * 12 + i) * 37) % 256) / 255.0f);
  EXPECT_TRUE(all_close(ex.data(), ts::tensor(want, {1, 4, 3}, ts::kFloat64), {1e-7, 0}));
  EXPECT_EQ(ex.target().dtype(), ts::kInt64);
  EXPECT_EQ(ex.target().dim(), 0);
  EXPECT_EQ(ex.target().item<int64_t>(), 2);  // (4 * 3) % 10
  EXPECT_EQ(train.labels().sizes(), (ts::Shape{6}));
  EXPECT_EQ(train.images().sizes(), (ts::Shape{6, 1, 4, 3}));
  EXPECT_EQ(train.get(-1).target().item<int64_t>(), 5);
  EXPECT_THROW(train.get(6), ts::IndexError);

  // The batched path equals stacking single examples, bit for bit.
  ts::Tensor idx = ts::tensor(std::vector<int64_t>{5, 0, 3}, {3}, ts::kInt64);
  ts::data::Example batch = *train.get_batch(idx);
  ts::data::Example stacked = ts::data::default_collate({train.get(5), train.get(0), train.get(3)});
  EXPECT_TRUE(all_close(batch[0], stacked[0], {0, 0}));
  EXPECT_TRUE(all_close(batch[1], stacked[1], {0, 0}));

  ts::data::MNIST normalized(dir.str(), ts::data::Split::Train, ts::data::Normalize{0.5, 0.25});
  EXPECT_TRUE(all_close(normalized.get(4).data(), (ex.data() - 0.5) / 0.25));
  EXPECT_THROW(ts::data::MNIST(dir.str(), ts::data::Split::Train, ts::data::Normalize{0.5, 0.0}), ts::ValueError);
}

TEST(Mnist, MissingOrCorruptFilesSayHowToGetThem) {
  TempDir dir;
  expect_io_error([&] { ts::data::FashionMNIST fm(dir.str()); },
                  {"FashionMNIST", dir.str(), "train-images-idx3-ubyte", "apt-get install dataset-fashion-mnist"});
  expect_io_error([&] { ts::data::MNIST m(dir.str(), ts::data::Split::Test); },
                  {"MNIST", "t10k-images-idx3-ubyte", dir.str()});
  write_mnist(dir, "train", 3);
  // A label file for a different number of examples.
  Bytes labels = idx_header(0x08, {2});
  labels.insert(labels.end(), {1, 2});
  write_gz(dir.file("train-labels-idx1-ubyte.gz"), labels);
  expect_io_error([&] { ts::data::FashionMNIST fm(dir.str()); },
                  {"3 images", "2 labels", dir.file("train-labels-idx1-ubyte.gz"), "dataset-fashion-mnist"});
  // A truncated image file: the error names it and says how to get a good copy.
  Bytes images = read_file(dir.file("train-images-idx3-ubyte"));
  images.erase(images.end() - 5, images.end());
  write_raw(dir.file("train-images-idx3-ubyte"), images);
  expect_io_error([&] { ts::data::FashionMNIST fm(dir.str()); },
                  {dir.file("train-images-idx3-ubyte"), "truncated", "apt-get install dataset-fashion-mnist"});
}

TEST(Mnist, RealFashionMnistWhenInstalled) {
  const std::string root = ts::data::FashionMNIST::kDefaultRoot;
  if (!fs::exists(fs::path(root) / "train-images-idx3-ubyte.gz") && !fs::exists(fs::path(root) / "train-images-idx3-ubyte")) {
    if (in_ci()) FAIL() << root << " is missing under CI=true; ./run installs dataset-fashion-mnist";
    GTEST_SKIP() << root << " not found: install Debian's dataset-fashion-mnist to run this test";
  }
  ts::data::FashionMNIST train(root, ts::data::Split::Train);
  ts::data::FashionMNIST test(root, ts::data::Split::Test);
  ASSERT_EQ(train.size(), 60000);
  ASSERT_EQ(test.size(), 10000);
  EXPECT_EQ(train.raw_images().sizes(), (ts::Shape{60000, 1, 28, 28}));
  EXPECT_EQ(test.raw_images().sizes(), (ts::Shape{10000, 1, 28, 28}));
  for (const ts::data::FashionMNIST* ds : {&train, &test}) {
    const ts::Tensor& y = ds->labels();
    EXPECT_EQ(y.dtype(), ts::kInt64);
    EXPECT_EQ(y.min().item<int64_t>(), 0);
    EXPECT_EQ(y.max().item<int64_t>(), 9);
    // Fashion-MNIST is balanced: 6,000 (train) or 1,000 (test) examples per class.
    const int64_t per_class = ds->size() / 10;
    for (int c = 0; c < 10; ++c) EXPECT_EQ(y.eq(c).sum().item<int64_t>(), per_class) << "class " << c;
  }
  ts::Tensor x = train.images();
  EXPECT_EQ(x.dtype(), ts::kFloat32);
  EXPECT_GE(x.min().item<double>(), 0.0);
  EXPECT_LE(x.max().item<double>(), 1.0);
  // The published statistics that kNormalize carries.
  EXPECT_NEAR(x.mean().item<double>(), ts::data::FashionMNIST::kNormalize.mean, 1e-3);
  EXPECT_NEAR(x.std().item<double>(), ts::data::FashionMNIST::kNormalize.std, 1e-3);
}

// ---- text -----------------------------------------------------------------------------------------

TEST(TextBytes, WindowsAreShiftedByOne) {
  TempDir dir;
  const std::string text = "hello, world!\n";  // 14 bytes
  write_raw(dir.file("t.txt"), Bytes(text.begin(), text.end()));
  ts::data::TextByteDataset ds(dir.file("t.txt"), 4, 3);
  // Windows start at 0, 3, 6, 9 (9 + 4 + 1 = 14 fits; 12 + 5 > 14 does not).
  ASSERT_EQ(ds.size(), 4);
  for (int64_t i = 0; i < ds.size(); ++i) {
    auto [x, y] = ds.get(i);
    std::vector<int64_t> wx, wy;
    for (int k = 0; k < 4; ++k) {
      wx.push_back(static_cast<unsigned char>(text[3 * i + k]));
      wy.push_back(static_cast<unsigned char>(text[3 * i + k + 1]));
    }
    EXPECT_EQ(x.dtype(), ts::kInt64);
    EXPECT_EQ(x.tolist<int64_t>(), wx) << "window " << i;
    EXPECT_EQ(y.tolist<int64_t>(), wy) << "window " << i;
  }
  // stride defaults to block_size: non-overlapping windows.
  ts::data::TextByteDataset flat(dir.file("t.txt"), 4);
  EXPECT_EQ(flat.size(), 3);  // starts 0, 4, 8: "orld" at 8
  EXPECT_EQ(flat.get(2)[0].tolist<int64_t>(), (std::vector<int64_t>{'o', 'r', 'l', 'd'}));
  ts::data::TextByteDataset every(dir.file("t.txt"), 13, 1);
  EXPECT_EQ(every.size(), 1);
  EXPECT_THROW(every.get(1), ts::IndexError);

  ts::Tensor idx = ts::tensor(std::vector<int64_t>{3, 0, 2}, {3}, ts::kInt64);
  ts::data::Example batch = *ds.get_batch(idx);
  ts::data::Example stacked = ts::data::default_collate({ds.get(3), ds.get(0), ds.get(2)});
  EXPECT_EQ(batch[0].sizes(), (ts::Shape{3, 4}));
  EXPECT_EQ(batch[0].tolist<int64_t>(), stacked[0].tolist<int64_t>());
  EXPECT_EQ(batch[1].tolist<int64_t>(), stacked[1].tolist<int64_t>());
}

TEST(TextBytes, GzipFilesAndErrors) {
  TempDir dir;
  Bytes bytes;
  for (int i = 0; i < 300; ++i) bytes.push_back(static_cast<uint8_t>(i % 256));  // every byte value
  write_gz(dir.file("b.gz"), bytes);
  ts::data::TextByteDataset ds(dir.file("b.gz"), 255, 1);
  EXPECT_EQ(ds.bytes().numel(), 300);
  EXPECT_EQ(ds.size(), 300 - 255);
  EXPECT_EQ(ds.get(44)[1].tolist<int64_t>().back(), 299 % 256);

  const std::string missing = dir.file("missing.txt");
  expect_io_error([&] { ts::data::TextByteDataset t(missing, 8); }, {"TextByteDataset", missing});
  write_raw(dir.file("short.txt"), Bytes{'a', 'b', 'c'});
  EXPECT_THROW(ts::data::TextByteDataset(dir.file("short.txt"), 3), ts::ValueError);
  EXPECT_THROW(ts::data::TextByteDataset(dir.file("b.gz"), 0), ts::ValueError);
  EXPECT_THROW(ts::data::TextByteDataset(dir.file("b.gz"), 4, 0), ts::ValueError);
  Bytes gz = read_file(dir.file("b.gz"));
  write_raw(dir.file("cut.gz"), Bytes(gz.begin(), gz.begin() + static_cast<long>(gz.size() / 2)));
  expect_io_error([&] { ts::data::TextByteDataset t(dir.file("cut.gz"), 8); }, {dir.file("cut.gz")});
}
