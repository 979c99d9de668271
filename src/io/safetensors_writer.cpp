// Writing safetensors: names in sorted order, data laid out contiguously in that order, the header
// compact JSON padded with spaces to a multiple of 8 bytes (so the data section starts 8-aligned),
// "__metadata__" first when there is any. Tensors on another device or with another layout are
// copied to contiguous CPU memory one at a time while writing, so saving needs at most one extra
// tensor's memory. save_safetensors writes `path + ".tmp"`, fsyncs it and renames it over `path`:
// a crash leaves either the old file or the new one under the final name, never a partial one.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "io/safetensors_dtype.h"
#include "io/safetensors_format.h"
#include "tessera/error.h"
#include "tessera/safetensors.h"

namespace tessera {
namespace {

// The format is little-endian; tensors are written as their in-memory bytes.
static_assert(std::endian::native == std::endian::little, "safetensors writing assumes a little-endian host");

using OrderedJson = nlohmann::ordered_json;

// The 8-byte length, then the padded header. Checks names, metadata and devices before any byte is
// written, so that a bad argument never leaves a file behind.
std::string make_header(const char* op, const std::map<std::string, Tensor>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  OrderedJson h = OrderedJson::object();
  if (!metadata.empty()) {
    OrderedJson m = OrderedJson::object();
    for (const auto& [k, v] : metadata) {
      TS_CHECK(io::is_valid_utf8(k) && io::is_valid_utf8(v), ValueError, op, ": metadata key \"", k,
               "\" or its value is not valid UTF-8");
      m[k] = v;
    }
    h[io::kMetadataKey] = std::move(m);
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {  // std::map: sorted by name, bytewise, as the reference
    TS_CHECK(name != io::kMetadataKey, ValueError, op, ": \"__metadata__\" is reserved and cannot name a tensor");
    TS_CHECK(io::is_valid_utf8(name), ValueError, op, ": tensor name \"", name, "\" is not valid UTF-8");
    TS_CHECK(t.defined(), ValueError, op, ": tensor \"", name, "\" is undefined");
    TS_CHECK(!t.is_meta(), DeviceError, op, ": tensor \"", name, "\" is on the meta device and has no data to save");
    uint64_t nbytes = static_cast<uint64_t>(t.numel()) * element_size(t.dtype());
    OrderedJson shape = OrderedJson::array();
    for (int64_t d : t.sizes()) shape.push_back(d);
    OrderedJson entry = OrderedJson::object();
    entry["dtype"] = safetensors_dtype_code(t.dtype());
    entry["shape"] = std::move(shape);
    entry["data_offsets"] = OrderedJson::array({offset, offset + nbytes});
    h[name] = std::move(entry);
    offset += nbytes;
  }
  std::string json = h.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  uint64_t n = json.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  out += json;
  return out;
}

// The bytes of `t` in row-major order on the CPU (a copy only when `t` is elsewhere or strided).
Tensor host_contiguous(const Tensor& t) { return t.to(kCPU).contiguous(); }

void write_all(int fd, const char* p, size_t n, const std::string& tmp) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) TS_THROW(IOError, "save_safetensors: cannot write ", tmp, ": ", std::strerror(w < 0 ? errno : EIO));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Makes the rename itself durable; best effort, as some filesystems refuse fsync on directories.
void sync_parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  fsync(fd);
  close(fd);
}

}  // namespace

std::string serialize_safetensors(const std::map<std::string, Tensor>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  std::string out = make_header("serialize_safetensors", tensors, metadata);
  for (const auto& [name, t] : tensors) {
    if (t.numel() == 0) continue;
    Tensor c = host_contiguous(t);
    out.append(static_cast<const char*>(c.data_ptr()), c.nbytes());
  }
  return out;
}

void save_safetensors(const std::map<std::string, Tensor>& tensors, const std::string& path,
                      const std::map<std::string, std::string>& metadata) {
  std::string header = make_header("save_safetensors", tensors, metadata);
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  TS_CHECK(fd >= 0, IOError, "save_safetensors: cannot create ", tmp, ": ", std::strerror(errno));
  try {
    write_all(fd, header.data(), header.size(), tmp);
    for (const auto& [name, t] : tensors) {
      if (t.numel() == 0) continue;
      Tensor c = host_contiguous(t);
      write_all(fd, static_cast<const char*>(c.data_ptr()), c.nbytes(), tmp);
    }
    TS_CHECK(fsync(fd) == 0, IOError, "save_safetensors: cannot sync ", tmp, ": ", std::strerror(errno));
    int rc = close(fd);
    fd = -1;
    TS_CHECK(rc == 0, IOError, "save_safetensors: cannot close ", tmp, ": ", std::strerror(errno));
    TS_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, IOError, "save_safetensors: cannot rename ", tmp, " to ",
             path, ": ", std::strerror(errno));
  } catch (...) {
    if (fd >= 0) close(fd);
    unlink(tmp.c_str());
    throw;
  }
  sync_parent_dir(path);
}

}  // namespace tessera
