// Reading safetensors: SafetensorsFile memory-maps a file and hands out tensors that view the
// mapping; load_safetensors and deserialize_safetensors return every tensor of a file or buffer.
//
// Note [safetensors mapping lifetime]: the whole mapping is ONE Storage whose DataPtr deleter
// unmaps it, so every tensor viewing the file holds the mapping through its TensorImpl's
// shared_ptr<Storage>; the mapping goes when the last of them (or the SafetensorsFile) goes.
// The mapping is MAP_PRIVATE and writable: the file is opened read-only and never written, but an
// in-place op on a loaded tensor gets private copy-on-write pages instead of a fault. A tensor whose
// absolute byte offset is not a multiple of its element size cannot be a view (TensorImpl offsets
// count elements) and is copied; so is a bool tensor holding bytes other than 0 and 1, normalized to
// 0/1 because any other byte is not a valid C++ bool.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "io/safetensors_format.h"
#include "tensor/tensor_impl.h"
#include "tessera/error.h"
#include "tessera/safetensors.h"

namespace tessera {
namespace io {
namespace {

struct Mapping {
  void* addr;
  size_t len;
};

void unmap(void* ctx) {
  auto* m = static_cast<Mapping*>(ctx);
  if (m->addr) munmap(m->addr, m->len);
  delete m;
}

// Closes the descriptor on every path out of map_file; the mapping outlives it.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

std::shared_ptr<Storage> map_file(const std::string& path) {
  Fd f{open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) TS_THROW(IOError, "safetensors: ", path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (fstat(f.fd, &st) != 0) TS_THROW(IOError, "safetensors: ", path, ": cannot stat: ", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) TS_THROW(IOError, "safetensors: ", path, ": not a regular file");
  size_t len = static_cast<size_t>(st.st_size);
  void* addr = nullptr;
  if (len > 0) {
    addr = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE, f.fd, 0);
    if (addr == MAP_FAILED) TS_THROW(IOError, "safetensors: ", path, ": cannot map ", len, " bytes: ", std::strerror(errno));
  }
  DataPtr ptr(addr, new Mapping{addr, len}, &unmap);
  return std::make_shared<Storage>(std::move(ptr), len, kCPU);
}

}  // namespace

Tensor tensor_from_buffer(const std::shared_ptr<Storage>& storage, const TensorEntry& entry, uint64_t data_start) {
  const size_t esize = element_size(entry.dtype);
  const uint64_t at = data_start + entry.begin;
  const size_t nbytes = entry.end - entry.begin;
  const auto* src = static_cast<const unsigned char*>(storage->data()) + at;
  bool view = at % esize == 0;
  if (view && entry.dtype == DType::Bool) {
    for (size_t i = 0; i < nbytes && view; ++i) view = src[i] <= 1;
  }
  if (view) {
    // Through set_layout, so that the view is bounds-checked against the mapping whatever the header
    // check above let through (Note [Checked layouts]).
    auto impl = std::make_shared<TensorImpl>(storage, entry.dtype, Shape{}, Shape{}, 0);
    impl->set_layout(entry.shape, contiguous_strides(entry.shape), static_cast<int64_t>(at / esize));
    return Tensor(std::move(impl));
  }
  Tensor t = make_empty(entry.shape, entry.dtype, kCPU);
  if (nbytes == 0) return t;
  auto* dst = static_cast<unsigned char*>(t.data_ptr());
  if (entry.dtype == DType::Bool) {
    for (size_t i = 0; i < nbytes; ++i) dst[i] = src[i] != 0;
  } else {
    std::memcpy(dst, src, nbytes);
  }
  return t;
}

}  // namespace io

struct SafetensorsFile::State {
  std::string path;
  std::shared_ptr<Storage> storage;
  io::ParsedHeader header;
  std::unordered_map<std::string, size_t> index;  // name -> position in header.entries
};

SafetensorsFile::SafetensorsFile(const std::string& path) : state_(std::make_unique<State>()) {
  state_->path = path;
  state_->storage = io::map_file(path);
  state_->header = io::parse_safetensors_header(static_cast<const unsigned char*>(state_->storage->data()),
                                                state_->storage->nbytes(), path);
  for (size_t i = 0; i < state_->header.entries.size(); ++i) state_->index.emplace(state_->header.entries[i].name, i);
}

SafetensorsFile::~SafetensorsFile() = default;

std::vector<std::string> SafetensorsFile::keys() const {
  std::vector<std::string> out;
  out.reserve(state_->header.entries.size());
  for (const io::TensorEntry& e : state_->header.entries) out.push_back(e.name);
  return out;
}

bool SafetensorsFile::contains(const std::string& name) const { return state_->index.count(name) != 0; }

Tensor SafetensorsFile::get(const std::string& name) const {
  auto it = state_->index.find(name);
  TS_CHECK(it != state_->index.end(), IndexError, "SafetensorsFile.get: no tensor named \"", name, "\" in ",
           state_->path, " (it holds ", state_->index.size(), " tensors)");
  return io::tensor_from_buffer(state_->storage, state_->header.entries[it->second], state_->header.data_start);
}

const std::map<std::string, std::string>& SafetensorsFile::metadata() const { return state_->header.metadata; }

std::map<std::string, Tensor> load_safetensors(const std::string& path) {
  SafetensorsFile file(path);
  std::map<std::string, Tensor> out;
  for (const std::string& k : file.keys()) out.emplace(k, file.get(k));
  return out;
}

std::map<std::string, Tensor> deserialize_safetensors(const std::string& bytes, const std::string& name) {
  // Validate the caller's bytes first, so that a malformed buffer costs no copy.
  io::ParsedHeader h = io::parse_safetensors_header(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), name);
  // One copy of the whole buffer, viewed by every tensor (the in-memory twin of the mapping).
  auto storage = std::make_shared<Storage>(bytes.size(), kCPU);
  if (!bytes.empty()) std::memcpy(storage->data(), bytes.data(), bytes.size());
  std::map<std::string, Tensor> out;
  for (const io::TensorEntry& e : h.entries) out.emplace(e.name, io::tensor_from_buffer(storage, e, h.data_start));
  return out;
}

}  // namespace tessera
