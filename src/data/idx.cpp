// The IDX format of MNIST (LeCun et al.): magic 0x0000TTNN, NN big-endian uint32 dims, big-endian
// elements. read_idx validates everything it is given before trusting it:
//  - the magic number (two zero bytes, a known type code);
//  - for a plain file, header + dims x element size must equal the file size exactly;
//  - for a gzip file, whose decompressed size is unknown up front, the dims may not claim more data than
//    deflate could possibly expand the file to (1032:1), so a corrupt header cannot make us allocate
//    terabytes; then the data must be all there and nothing may follow it, and the gzip trailer (CRC,
//    length) must check out.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "data/gz_file.h"
#include "tessera/data/datasets.h"
#include "tessera/error.h"
#include "tessera/functions.h"

namespace tessera::data {
namespace {

constexpr const char* kOp = "read_idx";
// zlib's deflate cannot expand data by more than this factor (zlib technical details, "maximum
// compression ratio"); a little slack for the gzip header.
constexpr uint64_t kMaxDeflateRatio = 1032;

struct IdxType {
  uint8_t code;
  const char* name;
  size_t file_size;  // bytes per element in the file
  DType dtype;       // what read_idx returns
};
constexpr IdxType kTypes[] = {
    {0x08, "uint8", 1, kUInt8},   {0x09, "int8", 1, kInt8},       {0x0B, "int16", 2, kInt32},
    {0x0C, "int32", 4, kInt32},   {0x0D, "float32", 4, kFloat32}, {0x0E, "float64", 8, kFloat64},
};

const IdxType* find_type(uint8_t code) {
  for (const IdxType& t : kTypes) {
    if (t.code == code) return &t;
  }
  return nullptr;
}

uint32_t load_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Reverses the bytes of each `width`-byte element in place (big-endian <-> host on little-endian).
void swap_elements(uint8_t* p, size_t count, size_t width) {
  if constexpr (std::endian::native == std::endian::big) return;
  if (width == 1) return;
  for (size_t i = 0; i < count; ++i, p += width) {
    for (size_t a = 0, b = width - 1; a < b; ++a, --b) std::swap(p[a], p[b]);
  }
}

std::string hex32(uint32_t v) {
  static const char* digits = "0123456789ABCDEF";
  std::string s = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) s += digits[(v >> shift) & 0xF];
  return s;
}

}  // namespace

Tensor read_idx(const std::string& path) {
  detail::GzReader in(path, kOp);
  const char* what = in.compressed() ? "the decompressed file" : "the file";

  uint8_t magic[4];
  const size_t got_magic = in.read(magic, 4);
  TS_CHECK(got_magic == 4, IOError, kOp, ": '", path, "' is truncated at offset ", got_magic, ": ", what, " holds ",
           got_magic, " bytes, fewer than the 4-byte IDX magic number");
  const uint32_t magic_value = load_be32(magic);
  const IdxType* type = find_type(magic[2]);
  TS_CHECK(magic[0] == 0 && magic[1] == 0 && type != nullptr, IOError, kOp, ": '", path,
           "' is not an IDX file: bad magic number ", hex32(magic_value), " at offset 0",
           " (expected 0x0000TTNN with type code TT one of 08, 09, 0B, 0C, 0D, 0E and NN the number of dims)");
  const size_t ndim = magic[3];

  std::vector<uint8_t> raw_dims(4 * ndim);
  const size_t got_dims = in.read(raw_dims.data(), raw_dims.size());
  TS_CHECK(got_dims == raw_dims.size(), IOError, kOp, ": '", path, "' is truncated at offset ", 4 + got_dims,
           ": its magic number announces ", ndim, " dims (", 4 * ndim, " bytes) but ", what, " ends ", got_dims,
           " bytes after it");
  Shape dims(ndim);
  uint64_t numel = 1;
  bool overflow = false;
  for (size_t d = 0; d < ndim; ++d) {
    dims[d] = load_be32(&raw_dims[4 * d]);
    const auto size = static_cast<uint64_t>(dims[d]);
    if (size != 0 && numel > (uint64_t{1} << 60) / size) overflow = true;
    numel *= size;
  }
  TS_CHECK(!overflow, IOError, kOp, ": '", path, "' is corrupt: its dims ", dims, " (at offset 4) describe more than 2^60 elements");
  const uint64_t header_bytes = 4 + 4 * ndim;
  const uint64_t data_bytes = numel * type->file_size;

  if (!in.compressed()) {
    TS_CHECK(in.file_size() == header_bytes + data_bytes, IOError, kOp, ": '", path, "' is ",
             in.file_size() < header_bytes + data_bytes ? "truncated at offset " : "corrupt: data goes on past offset ",
             std::min<uint64_t>(in.file_size(), header_bytes + data_bytes), ": its dims ", dims, " of ",
             type->name, " need ", data_bytes, " bytes of data after the ", header_bytes, "-byte header, but the file holds ",
             in.file_size() - header_bytes, "; the dims disagree with the file size");
  } else {
    TS_CHECK(data_bytes <= (in.file_size() + 64) * kMaxDeflateRatio, IOError, kOp, ": '", path,
             "' is corrupt: its dims ", dims, " (at offset 4) of ", type->name, " need ", data_bytes,
             " bytes, more than a gzip file of ", in.file_size(), " bytes can hold");
  }

  // int16 has no tessera dtype: read it into a side buffer and widen; the rest go straight to the tensor.
  const bool widen = type->code == 0x0B;
  Tensor out = empty(dims, type->dtype);
  std::vector<uint8_t> side(widen ? static_cast<size_t>(data_bytes) : 0);
  uint8_t* dst = widen ? side.data() : static_cast<uint8_t*>(out.data_ptr());
  const size_t got = in.read(dst, static_cast<size_t>(data_bytes));
  TS_CHECK(got == data_bytes, IOError, kOp, ": '", path, "' is truncated at offset ", header_bytes + got, ": its dims ",
           dims, " of ", type->name, " need ", data_bytes, " bytes of data after the header, but ", what,
           " holds only ", got);
  uint8_t extra;
  // Reading past the data also makes zlib check the gzip trailer (CRC and length).
  TS_CHECK(in.read(&extra, 1) == 0, IOError, kOp, ": '", path, "' is corrupt: data goes on past offset ",
           header_bytes + data_bytes, ": ", what, " holds more data than its dims ", dims, " of ", type->name,
           " account for (", data_bytes, " bytes after the header)");

  swap_elements(dst, static_cast<size_t>(numel), type->file_size);
  if (widen) {
    auto* o = out.data_ptr<int32_t>();
    for (uint64_t i = 0; i < numel; ++i) {
      int16_t v;
      std::memcpy(&v, side.data() + 2 * i, 2);
      o[i] = v;
    }
  }
  return out;
}

void write_idx(const std::string& path, const Tensor& t) {
  TS_CHECK(t.defined(), ValueError, "write_idx: the tensor is undefined");
  uint8_t code = 0;
  for (const IdxType& type : kTypes) {
    if (type.dtype == t.dtype() && type.code != 0x0B) code = type.code;
  }
  TS_CHECK(code != 0, DTypeError, "write_idx: IDX holds uint8, int8, int32, float32 or float64, got ",
           dtype_name(t.dtype()));
  TS_CHECK(t.dim() <= 255, ShapeError, "write_idx: IDX holds at most 255 dims, got ", t.dim());
  for (int64_t d = 0; d < t.dim(); ++d) {
    TS_CHECK(t.size(d) <= std::numeric_limits<uint32_t>::max(), ShapeError, "write_idx: dim ", d, " of size ",
             t.size(d), " does not fit IDX's uint32 dims");
  }
  const Tensor c = t.cpu().contiguous();
  const size_t width = c.element_size();
  const size_t header = 4 + 4 * static_cast<size_t>(c.dim());
  std::vector<uint8_t> buf(header + c.nbytes());
  buf[2] = code;
  buf[3] = static_cast<uint8_t>(c.dim());
  for (int64_t d = 0; d < c.dim(); ++d) {
    const auto v = static_cast<uint32_t>(c.size(d));
    for (int k = 0; k < 4; ++k) buf[4 + 4 * d + k] = static_cast<uint8_t>(v >> (24 - 8 * k));
  }
  if (c.nbytes() > 0) std::memcpy(buf.data() + header, c.data_ptr(), c.nbytes());
  swap_elements(buf.data() + header, static_cast<size_t>(c.numel()), width);
  const bool gz = path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  detail::write_file(path, buf.data(), buf.size(), gz, "write_idx");
}

}  // namespace tessera::data
