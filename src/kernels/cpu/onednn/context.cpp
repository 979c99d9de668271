// The oneDNN engine, the per-thread streams and the memory helpers of context.h.
#include "kernels/cpu/onednn/context.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/onednn/onednn.h"
#include "tensor/tensor_impl.h"
#include "tessera/error.h"

namespace tessera::cpu::onednn {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

std::optional<dnnl::memory::data_type> to_dnnl(DType dt) {
  switch (dt) {
    case DType::Float32: return dnnl::memory::data_type::f32;
    case DType::BFloat16: return dnnl::memory::data_type::bf16;
    default: return std::nullopt;
  }
}

dnnl::memory::desc plain_desc(const Tensor& t, const dnnl::memory::dims& dims, const dnnl::memory::dims& strides) {
  return dnnl::memory::desc(dims, *to_dnnl(t.dtype()), strides);
}

dnnl::memory::desc plain_desc(const Tensor& t) {
  return plain_desc(t, dnnl::memory::dims(t.sizes().begin(), t.sizes().end()),
                    dnnl::memory::dims(t.strides().begin(), t.strides().end()));
}

dnnl::memory wrap(const dnnl::memory::desc& d, const Tensor& t) {
  return dnnl::memory(d, engine(), t.data_ptr());
}

namespace {

struct FreeAligned {
  void operator()(unsigned char* p) const { std::free(p); }
};
struct Kept {
  std::unique_ptr<unsigned char, FreeAligned> data;
  size_t bytes = 0;
};

}  // namespace

dnnl::memory scratch(const dnnl::memory::desc& d, int slot) {
  const size_t bytes = d.get_size();
  if (bytes > kKeepBytes) return dnnl::memory(d, engine());
  thread_local Kept kept[kScratchSlots];
  Kept& k = kept[slot];
  if (k.bytes < bytes) {
    const size_t rounded = (bytes + 63) / 64 * 64;  // aligned_alloc wants a multiple of the alignment
    k.data.reset(static_cast<unsigned char*>(std::aligned_alloc(64, rounded)));
    TS_CHECK(k.data != nullptr, OutOfMemoryError, "oneDNN scratch: could not allocate ", rounded, " bytes");
    k.bytes = rounded;
  }
  return dnnl::memory(d, engine(), k.data.get());
}

dnnl::memory to_layout(const dnnl::memory& user, const dnnl::memory::desc& want, int slot) {
  if (user.get_desc() == want) return user;
  dnnl::memory m = scratch(want, slot);
  reorder_into(user, m);
  return m;
}

namespace {

void add_desc(Key& key, const dnnl::memory::desc& d) {
  // dnnl_memory_desc_t is a plain struct in oneDNN 2: its bytes decide the layout.
  const dnnl_memory_desc_t& raw = d.data;
  int64_t words[(sizeof raw + 7) / 8] = {};
  std::memcpy(words, &raw, sizeof raw);
  for (int64_t w : words) key.add(w);
}

struct ReorderEntry {
  dnnl::reorder prim;
};

}  // namespace

void reorder_into(const dnnl::memory& from, const dnnl::memory& to) {
  static PrimitiveCache<ReorderEntry> cache;  // Note [oneDNN primitive cache]
  dnnl::memory src = from, dst = to;
  Key key;
  add_desc(key, src.get_desc());
  add_desc(key, dst.get_desc());
  auto e = cache.get(key, [&] { return std::make_shared<const ReorderEntry>(ReorderEntry{dnnl::reorder(src, dst)}); });
  e->prim.execute(stream(), src, dst);
}

namespace {
std::atomic<int64_t> taken{0};
}  // namespace

void count_call() { taken.fetch_add(1, std::memory_order_relaxed); }
int64_t calls_taken() { return taken.load(std::memory_order_relaxed); }

size_t KeyHash::operator()(const Key& k) const {
  size_t h = 1469598103934665603ull;
  for (int64_t x : k.v) h = (h ^ std::hash<int64_t>()(x)) * 1099511628211ull;
  return h;
}

}  // namespace tessera::cpu::onednn
