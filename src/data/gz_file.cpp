// zlib gzFile wrappers (see gz_file.h). zlib reports a gzip stream that ends early as Z_BUF_ERROR
// ("unexpected end of file") and a damaged one (bad header, bad deflate data, CRC or length mismatch in
// the trailer) as Z_DATA_ERROR; both become IOError here, naming the file and where the damage was
// found: the offset in the decompressed data (the bytes delivered so far) and in the file (zlib's
// gzoffset, which runs ahead of the damage by at most its input buffer). The trailer is only checked
// when the stream is read to its end, which read_all() and callers that probe for trailing data do.
#include "data/gz_file.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "tessera/error.h"

namespace tessera::data::detail {
namespace {

gzFile as_gz(void* f) { return static_cast<gzFile>(f); }

// The file's state after an operation: throws with zlib's message when the stream is in error.
// `delivered`: the decompressed bytes handed out before the error.
void check_gz(gzFile f, const std::string& path, const char* op, uint64_t delivered) {
  int errnum = Z_OK;
  const char* msg = gzerror(f, &errnum);
  if (errnum == Z_OK) return;
  if (errnum == Z_ERRNO) {
    TS_THROW(IOError, op, ": error reading '", path, "' at offset ", delivered, ": ", std::strerror(errno));
  }
  const long in_file = gzoffset(f);
  TS_THROW(IOError, op, ": '", path, "' is a corrupt or truncated gzip file at offset ", delivered,
           " of the decompressed data (about byte ", in_file < 0 ? 0 : in_file, " of the file; zlib: ",
           msg ? msg : "unknown error", ")");
}

}  // namespace

GzReader::GzReader(const std::string& path, const char* op) : path_(path), op_(op) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  TS_CHECK(fs::exists(st), IOError, op, ": cannot open '", path, "': No such file or directory");
  TS_CHECK(!fs::is_directory(st), IOError, op, ": cannot open '", path, "': it is a directory, not a file");
  file_size_ = fs::file_size(path, ec);
  TS_CHECK(!ec, IOError, op, ": cannot read the size of '", path, "': ", ec.message());
  errno = 0;
  gzFile f = gzopen(path.c_str(), "rb");
  TS_CHECK(f != nullptr, IOError, op, ": cannot open '", path, "': ", errno ? std::strerror(errno) : "out of memory");
  file_ = f;
  gzbuffer(f, 1 << 17);
  // Looks at the first bytes: gzip magic or a plain file.
  const int direct = gzdirect(f);
  try {
    check_gz(f, path_, op_, 0);
  } catch (...) {
    gzclose_r(f);  // the destructor does not run for a constructor that throws
    file_ = nullptr;
    throw;
  }
  compressed_ = direct == 0;
}

GzReader::~GzReader() {
  if (file_) gzclose_r(as_gz(file_));
}

size_t GzReader::read(void* dst, size_t n) {
  auto* out = static_cast<unsigned char*>(dst);
  size_t total = 0;
  while (total < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - total, 1u << 30));
    const int got = gzread(as_gz(file_), out + total, chunk);
    if (got > 0) delivered_ += static_cast<uint64_t>(got);
    check_gz(as_gz(file_), path_, op_, delivered_);
    if (got <= 0) break;
    total += static_cast<size_t>(got);
  }
  return total;
}

std::vector<uint8_t> GzReader::read_all() {
  std::vector<uint8_t> data;
  // The on-disk size is the exact size of a raw file and a lower bound (usually) for a gzip one.
  size_t cap = static_cast<size_t>(std::max<uint64_t>(file_size_, 1 << 16));
  for (;;) {
    const size_t used = data.size();
    data.resize(cap);
    const size_t got = read(data.data() + used, cap - used);
    data.resize(used + got);
    if (used + got < cap) return data;
    cap *= 2;
  }
}

void write_file(const std::string& path, const void* data, size_t n, bool compress, const char* op) {
  errno = 0;
  // "T" asks zlib for a plain copy, so one code path writes both.
  gzFile f = gzopen(path.c_str(), compress ? "wb6" : "wbT");
  TS_CHECK(f != nullptr, IOError, op, ": cannot open '", path, "' for writing: ",
           errno ? std::strerror(errno) : "out of memory");
  const auto* p = static_cast<const unsigned char*>(data);
  size_t done = 0;
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
    const int wrote = gzwrite(f, p + done, chunk);
    if (wrote <= 0) {
      int errnum = Z_OK;
      const std::string msg = gzerror(f, &errnum);
      gzclose_w(f);
      TS_THROW(IOError, op, ": error writing '", path, "': ", errnum == Z_ERRNO ? std::strerror(errno) : msg);
    }
    done += static_cast<size_t>(wrote);
  }
  const int rc = gzclose_w(f);
  TS_CHECK(rc == Z_OK, IOError, op, ": error closing '", path, "' (zlib error ", rc, ")");
}

}  // namespace tessera::data::detail
