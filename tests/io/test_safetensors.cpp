// safetensors reading and writing: round trips in every dtype and layout, the byte layout the
// reference writer produces, memory-mapped views sharing one storage that outlives the file object,
// atomic saves, a file written by an independent (Python struct + json) writer, and the committed
// corpus of malformed files (tests/io/corpus, made by make_corpus.py), each of which must raise
// IOError naming the file and the rule it breaks.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "common/test_util.h"

namespace ts = tessera;
namespace fs = std::filesystem;
using namespace tessera::testing;

namespace {

// A fresh directory per test, removed at the end.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("tessera_st_" + std::to_string(getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors buffer from a header text (padded to 8 bytes) and raw data.
std::string pack(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  return out + header + data;
}

std::string corpus_dir() { return ts::testing::source_path("tests/io/corpus"); }

// Same dtype, sizes and values, bit for bit (tolerance zero).
void expect_same(const ts::Tensor& actual, const ts::Tensor& expected, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(actual.defined());
  EXPECT_EQ(actual.dtype(), expected.dtype());
  EXPECT_EQ(actual.sizes(), expected.sizes());
  EXPECT_TRUE(actual.is_contiguous());
  EXPECT_TRUE(all_close(actual, expected, {0, 0}));
}

// Every dtype in every layout, plus 0-dim and zero-size tensors.
std::map<std::string, ts::Tensor> sample_tensors() {
  std::map<std::string, ts::Tensor> out;
  uint64_t seed = 1;
  for (ts::DType dt : all_dtypes()) {
    std::string d = ts::dtype_name(dt);
    for (const Layout& layout : layouts()) out[d + "." + layout.name] = layout.apply(test_data({3, 4}, dt, seed++));
    out[d + ".scalar"] = test_data({}, dt, seed++);
    out[d + ".empty"] = ts::zeros({0, 3}, dt);
    out[d + ".vector"] = test_data({5}, dt, seed++);
  }
  return out;
}

void expect_all_same(const std::map<std::string, ts::Tensor>& actual, const std::map<std::string, ts::Tensor>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (const auto& [name, t] : expected) {
    auto it = actual.find(name);
    ASSERT_NE(it, actual.end()) << name;
    expect_same(it->second, t, name);
  }
}

// Runs `fn`, which must raise IOError whose message holds every one of `parts`.
template <class Fn>
void expect_io_error(Fn&& fn, const std::vector<std::string>& parts, const std::string& what) {
  try {
    fn();
    ADD_FAILURE() << what << ": expected IOError, nothing was raised";
  } catch (const ts::IOError& e) {
    std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << what << ": \"" << p << "\" not in: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": expected IOError, got another exception: " << e.what();
  }
}

}  // namespace

TEST(Safetensors, RoundTripEveryDtypeInMemory) {
  auto tensors = sample_tensors();
  auto back = ts::deserialize_safetensors(ts::serialize_safetensors(tensors));
  expect_all_same(back, tensors);
}

TEST(Safetensors, RoundTripEveryDtypeThroughFile) {
  TempDir dir;
  auto tensors = sample_tensors();
  std::string path = dir.file("all.safetensors");
  ts::save_safetensors(tensors, path);
  expect_all_same(ts::load_safetensors(path), tensors);
  // The file holds exactly what serialize produces.
  EXPECT_EQ(read_bytes(path), ts::serialize_safetensors(tensors));
}

TEST(Safetensors, RoundTripEmptyMap) {
  std::string bytes = ts::serialize_safetensors({});
  EXPECT_EQ(bytes, std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
  EXPECT_TRUE(ts::deserialize_safetensors(bytes).empty());
}

TEST(Safetensors, MetadataRoundTrip) {
  TempDir dir;
  std::map<std::string, std::string> meta = {
      {"format", "pt"}, {"quote\"and\\slash", "line\nbreak"}, {"unicode", "\xc3\xa9t\xc3\xa9 \xe2\x9c\x93"}, {"empty", ""}};
  std::map<std::string, ts::Tensor> tensors = {{"w", test_data({2, 2}, ts::kFloat32)}};
  std::string path = dir.file("meta.safetensors");
  ts::save_safetensors(tensors, path, meta);
  ts::SafetensorsFile f(path);
  EXPECT_EQ(f.metadata(), meta);
  expect_same(f.get("w"), tensors["w"], "w");
  // No metadata: none comes back, and no "__metadata__" key is written.
  std::string plain = ts::serialize_safetensors(tensors);
  EXPECT_EQ(plain.find("__metadata__"), std::string::npos);
}

TEST(Safetensors, ByteLayoutMatchesReferenceWriter) {
  // One F32 tensor of shape (1, 2, 3): compact JSON, fields in the reference's order, no padding
  // needed here (the header is 64 bytes), then the raw little-endian floats.
  ts::Tensor t = ts::arange(6).to(ts::kFloat32).view({1, 2, 3});
  std::string bytes = ts::serialize_safetensors({{"attn.0", t}});
  std::string header = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  ASSERT_EQ(header.size(), 64u);
  ASSERT_EQ(bytes.size(), 8 + 64 + 24u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x40\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(bytes.substr(8, 64), header);
  std::vector<float> vals(6);
  std::memcpy(vals.data(), bytes.data() + 72, 24);
  EXPECT_EQ(vals, (std::vector<float>{0, 1, 2, 3, 4, 5}));

  // A shorter name: the header is padded with spaces so the data starts 8-aligned.
  std::string padded = ts::serialize_safetensors({{"attn0", t.view({1, 1, 2, 3})}});
  uint64_t n = 0;
  std::memcpy(&n, padded.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(padded.substr(8, n), std::string(R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})") + "       ");

  // Names sorted, data contiguous in name order, metadata first.
  std::string two = ts::serialize_safetensors({{"b", ts::ones({2}, ts::kInt64)}, {"a", ts::zeros({3}, ts::kUInt8)}},
                                              {{"framework", "tessera"}});
  std::memcpy(&n, two.data(), 8);
  std::string two_header = two.substr(8, n);
  two_header.erase(two_header.find_last_not_of(' ') + 1);
  EXPECT_EQ(two_header,
            R"({"__metadata__":{"framework":"tessera"},"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},)"
            R"("b":{"dtype":"I64","shape":[2],"data_offsets":[3,19]}})");
  EXPECT_EQ(two.size(), 8 + n + 19);
}

TEST(Safetensors, MmapViewsShareOneStorage) {
  TempDir dir;
  std::string path = dir.file("views.safetensors");
  ts::save_safetensors({{"a", test_data({4, 4}, ts::kFloat32)}, {"b", test_data({8}, ts::kFloat64, 2)}}, path);
  ts::SafetensorsFile f(path);
  ts::Tensor a = f.get("a"), b = f.get("b"), a2 = f.get("a");
  EXPECT_TRUE(a.is_alias_of(b));
  EXPECT_TRUE(a.is_alias_of(a2));
  // Both point into one buffer that starts with the header: a's data is 8 + header bytes in.
  std::string bytes = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(a.storage_offset() * 4, static_cast<int64_t>(8 + n));
  EXPECT_EQ(static_cast<char*>(b.data_ptr()) - static_cast<char*>(a.data_ptr()), 64);
  // In-memory deserialization shares one storage too.
  auto m = ts::deserialize_safetensors(bytes);
  EXPECT_TRUE(m["a"].is_alias_of(m["b"]));
  EXPECT_FALSE(m["a"].is_alias_of(a));
}

TEST(Safetensors, TensorsOutliveTheFileObject) {
  TempDir dir;
  std::string path = dir.file("outlive.safetensors");
  ts::Tensor w = test_data({3, 5}, ts::kBFloat16), i = test_data({7}, ts::kInt64, 3);
  ts::save_safetensors({{"w", w}, {"i", i}}, path);
  ts::Tensor w2, i2;
  {
    auto f = std::make_unique<ts::SafetensorsFile>(path);
    w2 = f->get("w");
    i2 = f->get("i");
  }
  fs::remove(path);  // the mapping stays valid after the name is gone
  expect_same(w2, w, "w");
  expect_same(i2, i, "i");
  w2 = ts::Tensor();
  expect_same(i2, i, "i after the other view is gone");
}

TEST(Safetensors, InPlaceWriteOnLoadedTensorLeavesFileUnchanged) {
  TempDir dir;
  std::string path = dir.file("cow.safetensors");
  ts::Tensor x = test_data({6}, ts::kFloat32);
  ts::save_safetensors({{"x", x}}, path);
  std::string before = read_bytes(path);
  {
    ts::SafetensorsFile f(path);
    ts::Tensor v = f.get("x");
    v.fill_(7);
    EXPECT_EQ(v.tolist<float>(), std::vector<float>(6, 7.0f));
    EXPECT_TRUE(all_close(f.get("x"), ts::full({6}, 7, ts::kFloat32), {0, 0}));  // same mapping
  }
  EXPECT_EQ(read_bytes(path), before);
  expect_same(ts::load_safetensors(path)["x"], x, "reloaded");
}

TEST(Safetensors, MisalignedOffsetIsCopied) {
  TempDir dir;
  // U8 at [0, 1) then F32 at [1, 5): the float is not 4-byte aligned in the file.
  float value = 2.5f;
  std::string data = std::string("\x09", 1) + std::string(reinterpret_cast<const char*>(&value), 4);
  std::string bytes = pack(R"({"u":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                           R"("f":{"dtype":"F32","shape":[1],"data_offsets":[1,5]}})",
                           data);
  std::string path = dir.file("misaligned.safetensors");
  write_bytes(path, bytes);
  ts::SafetensorsFile f(path);
  EXPECT_EQ(f.keys(), (std::vector<std::string>{"u", "f"}));  // offset order, not name order
  ts::Tensor u = f.get("u"), fl = f.get("f");
  EXPECT_EQ(u.tolist<int64_t>(), (std::vector<int64_t>{9}));
  EXPECT_EQ(fl.tolist<float>(), (std::vector<float>{2.5f}));
  EXPECT_FALSE(fl.is_alias_of(u));
  auto m = ts::deserialize_safetensors(bytes);
  EXPECT_EQ(m["f"].tolist<float>(), (std::vector<float>{2.5f}));
}

TEST(Safetensors, BoolBytesOtherThanZeroOneAreNormalized) {
  std::string bytes = pack(R"({"m":{"dtype":"BOOL","shape":[4],"data_offsets":[0,4]}})", std::string("\x00\x01\x02\xff", 4));
  ts::Tensor m = ts::deserialize_safetensors(bytes)["m"];
  EXPECT_EQ(m.tolist<int64_t>(), (std::vector<int64_t>{0, 1, 1, 1}));
  ts::Tensor ok = ts::deserialize_safetensors(pack(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})",
                                                   std::string("\x01\x00", 2)))["m"];
  EXPECT_EQ(ok.tolist<int64_t>(), (std::vector<int64_t>{1, 0}));
}

TEST(Safetensors, KeysContainsGetAndUnknownNames) {
  TempDir dir;
  std::string path = dir.file("keys.safetensors");
  ts::save_safetensors({{"z", ts::ones({2})}, {"a", ts::zeros({1})}}, path);
  ts::SafetensorsFile f(path);
  EXPECT_EQ(f.keys(), (std::vector<std::string>{"a", "z"}));
  EXPECT_TRUE(f.contains("z"));
  EXPECT_FALSE(f.contains("y"));
  EXPECT_THROW(f.get("y"), ts::IndexError);
  EXPECT_TRUE(f.metadata().empty());
}

TEST(Safetensors, AtomicSaveLeavesNoTemporary) {
  TempDir dir;
  std::string path = dir.file("model.safetensors");
  ts::save_safetensors({{"x", ts::ones({3})}}, path);
  EXPECT_TRUE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  // Overwriting replaces the whole file; an open mapping of the old one keeps its old contents.
  ts::SafetensorsFile old(path);
  ts::save_safetensors({{"y", ts::zeros({2, 2}, ts::kInt32)}}, path);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  auto now = ts::load_safetensors(path);
  ASSERT_EQ(now.count("y"), 1u);
  EXPECT_EQ(now.count("x"), 0u);
  EXPECT_EQ(old.get("x").tolist<float>(), (std::vector<float>{1, 1, 1}));
}

TEST(Safetensors, SaveErrors) {
  TempDir dir;
  std::string missing_dir = dir.file("no/such/dir/m.safetensors");
  expect_io_error([&] { ts::save_safetensors({{"x", ts::ones({1})}}, missing_dir); }, {"save_safetensors", "no/such/dir"},
                  "missing directory");
  EXPECT_FALSE(fs::exists(missing_dir + ".tmp"));
  // Bad arguments are refused before any byte is written.
  std::string path = dir.file("bad.safetensors");
  EXPECT_THROW(ts::save_safetensors({{"m", ts::empty({2}, ts::TensorOptions(ts::Device::meta()))}}, path), ts::DeviceError);
  EXPECT_THROW(ts::save_safetensors({{"__metadata__", ts::ones({1})}}, path), ts::ValueError);
  EXPECT_THROW(ts::save_safetensors({{"u", ts::Tensor()}}, path), ts::ValueError);
  EXPECT_THROW(ts::save_safetensors({{std::string("bad\xff", 4), ts::ones({1})}}, path), ts::ValueError);
  EXPECT_THROW(ts::serialize_safetensors({{"x", ts::ones({1})}}, {{"k", std::string("\xc0\xaf", 2)}}), ts::ValueError);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(Safetensors, ReadsFileWrittenByPython) {
  std::string path = corpus_dir() + "/valid_reference.safetensors";
  ts::SafetensorsFile f(path);
  EXPECT_EQ(f.keys(), (std::vector<std::string>{"weight", "index", "scale", "half", "bf", "count", "mask", "small",
                                                "bytes", "empty"}));
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"note", "written by struct + json"}}));
  ts::Tensor w = f.get("weight");
  EXPECT_EQ(w.dtype(), ts::kFloat32);
  EXPECT_EQ(w.sizes(), (ts::Shape{2, 3}));
  EXPECT_EQ(w.tolist<double>(), (std::vector<double>{0, 0.5, 1, 1.5, 2, 2.5}));
  EXPECT_EQ(f.get("index").tolist<int64_t>(), (std::vector<int64_t>{-1, 0, int64_t{1} << 40}));
  ts::Tensor s = f.get("scale");
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.dtype(), ts::kFloat64);
  EXPECT_EQ(s.tolist<double>(), (std::vector<double>{3.25}));
  EXPECT_EQ(f.get("half").dtype(), ts::kFloat16);
  EXPECT_EQ(f.get("half").tolist<double>(), (std::vector<double>{1.5, -2.0}));
  EXPECT_EQ(f.get("bf").dtype(), ts::kBFloat16);
  EXPECT_EQ(f.get("bf").tolist<double>(), (std::vector<double>{1.0, -0.5}));
  EXPECT_EQ(f.get("count").tolist<int64_t>(), (std::vector<int64_t>{7}));
  ts::Tensor m = f.get("mask");
  EXPECT_EQ(m.dtype(), ts::kBool);
  EXPECT_EQ(m.sizes(), (ts::Shape{2, 2}));
  EXPECT_EQ(m.tolist<int64_t>(), (std::vector<int64_t>{1, 0, 0, 1}));
  EXPECT_EQ(f.get("small").tolist<int64_t>(), (std::vector<int64_t>{-3, 4}));
  EXPECT_EQ(f.get("bytes").dtype(), ts::kUInt8);
  EXPECT_EQ(f.get("bytes").tolist<int64_t>(), (std::vector<int64_t>{250, 1}));
  EXPECT_EQ(f.get("empty").sizes(), (ts::Shape{0, 3}));
  // Re-saving what was read gives a file that reads back the same.
  auto all = ts::load_safetensors(path);
  expect_all_same(ts::deserialize_safetensors(ts::serialize_safetensors(all, f.metadata())), all);
}

// file -> text its error must contain (the rule it breaks).
static const std::map<std::string, std::string> kCorpusRules = {
    {"empty_file", "shorter than 8 bytes"},
    {"file_too_small", "shorter than 8 bytes"},
    {"header_too_large", "header is too large"},
    {"header_length_huge", "header is too large"},
    {"header_length_past_end", "runs past the end of the file"},
    {"header_invalid_utf8", "header is not valid UTF-8"},
    {"header_overlong_utf8", "header is not valid UTF-8"},
    {"header_invalid_json", "header is not valid JSON"},
    {"header_empty", "header is not valid JSON"},
    {"header_not_object", "header is not a JSON object"},
    {"header_string", "header is not a JSON object"},
    {"header_too_deep", "header nests deeper than a safetensors header can"},
    {"entry_not_object", "entry \"a\" is not an object"},
    {"missing_dtype", "is missing the field \"dtype\""},
    {"missing_shape", "is missing the field \"shape\""},
    {"missing_data_offsets", "is missing the field \"data_offsets\""},
    {"extra_field", "has an unexpected field \"offsets_extra\""},
    {"unknown_dtype", "unknown dtype \"F7\""},
    {"dtype_not_string", "unknown dtype 4"},
    {"shape_negative", "shape must be a list of non-negative integers"},
    {"shape_float", "shape must be a list of non-negative integers"},
    {"shape_not_list", "shape must be a list of non-negative integers"},
    {"data_offsets_not_pair", "data_offsets must be two non-negative integers"},
    {"data_offsets_negative", "data_offsets must be two non-negative integers"},
    {"data_offsets_reversed", "data_offsets begin 4 is after end 0"},
    {"duplicate_names", "duplicate tensor name \"a\""},
    {"duplicate_field", "duplicate key \"dtype\" inside \"a\""},
    {"metadata_not_map", "__metadata__ must be a map of strings to strings"},
    {"metadata_value_not_string", "__metadata__ must be a map of strings to strings"},
    {"numel_overflow", "the number of elements of shape"},
    {"byte_size_overflow", "the byte size of shape"},
    {"size_mismatch", "byte size disagrees with shape and dtype"},
    {"offsets_hole", "data offsets leave a hole"},
    {"offsets_not_from_zero", "data offsets leave a hole"},
    {"offsets_overlap", "data offsets overlap"},
    {"truncated_data", "data offsets run past the buffer"},
    {"trailing_bytes", "buffer has trailing bytes"},
};

TEST(SafetensorsMalformed, EveryCorpusFileRaisesItsRule) {
  ASSERT_TRUE(fs::is_directory(corpus_dir())) << corpus_dir();
  std::set<std::string> seen;
  for (const auto& de : fs::directory_iterator(corpus_dir())) {
    if (de.path().extension() != ".safetensors") continue;
    std::string stem = de.path().stem().string();
    if (stem.rfind("valid_", 0) == 0) continue;
    auto it = kCorpusRules.find(stem);
    if (it == kCorpusRules.end()) {
      ADD_FAILURE() << "corpus file without an expected rule: " << stem;
      continue;
    }
    seen.insert(stem);
    std::string path = de.path().string();
    expect_io_error([&] { ts::SafetensorsFile f(path); }, {path, it->second}, stem + " (file)");
    expect_io_error([&] { ts::load_safetensors(path); }, {path, it->second}, stem + " (load)");
    expect_io_error([&] { ts::deserialize_safetensors(read_bytes(path)); }, {"<memory>", it->second}, stem + " (memory)");
  }
  EXPECT_GE(seen.size(), 20u);
  for (const auto& [stem, rule] : kCorpusRules) EXPECT_TRUE(seen.count(stem)) << "missing corpus file: " << stem;
}

TEST(SafetensorsMalformed, MissingFileAndDirectory) {
  TempDir dir;
  expect_io_error([&] { ts::SafetensorsFile f(dir.file("absent.safetensors")); }, {"absent.safetensors", "cannot open"},
                  "absent");
  expect_io_error([&] { ts::load_safetensors(dir.file("")); }, {"not a regular file"}, "directory");
}

TEST(SafetensorsMalformed, EveryTruncationOfAValidFileIsRefused) {
  std::string bytes = read_bytes(corpus_dir() + "/valid_reference.safetensors");
  ASSERT_GT(bytes.size(), 100u);
  ts::deserialize_safetensors(bytes);  // the whole file is valid
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THROW(ts::deserialize_safetensors(bytes.substr(0, n)), ts::IOError) << "prefix of " << n << " bytes";
  }
}

TEST(SafetensorsMalformed, ByteFlipsNeverCrash) {
  // Every single-byte corruption either still parses or raises IOError; nothing else escapes.
  std::string bytes = read_bytes(corpus_dir() + "/valid_reference.safetensors");
  int refused = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (unsigned char x : {0x01, 0x80, 0xff}) {
      std::string b = bytes;
      b[i] = static_cast<char>(b[i] ^ x);
      try {
        auto m = ts::deserialize_safetensors(b);
        for (auto& [k, t] : m) (void)t.tolist<double>();  // read every byte that was accepted
      } catch (const ts::IOError&) {
        ++refused;
      }
    }
  }
  EXPECT_GT(refused, 0);
}
