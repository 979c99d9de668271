// The caching allocator's pool logic (Note [CUDA caching allocator] in block_pool.h). Everything here
// runs under the device's mutex; statistics change only next to the state they describe.
#include "runtime/block_pool.h"

#include <algorithm>
#include <bit>
#include <limits>

#include "tessera/error.h"

namespace tessera::alloc {

struct Block {
  char* ptr = nullptr;
  size_t size = 0;
  size_t requested_size = 0;  // what the owner asked for (allocated blocks)
  void* stream = nullptr;     // the owning stream
  Pool* pool = nullptr;
  Segment* segment = nullptr;
  Block* prev = nullptr;  // neighbours in the segment, by address
  Block* next = nullptr;
  bool allocated = false;
  bool deferred = false;           // freed during a capture, waiting for it to end (Note [Graph private pools])
  int event_count = 0;             // events to complete before the block is free again
  uint64_t gc_base = 0;            // the pool's search count when the block was last made free
  std::vector<void*> stream_uses;  // other streams using it (record_stream)

  bool is_split() const { return prev != nullptr || next != nullptr; }
  bool active() const { return allocated || event_count > 0 || deferred; }
};

struct Segment {
  CachingBlockAllocator* owner = nullptr;
  char* ptr = nullptr;
  size_t size = 0;
  void* stream = nullptr;
  Pool* pool = nullptr;
  Block* head = nullptr;  // the block at ptr
};

namespace {
struct BlockLess {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return reinterpret_cast<uintptr_t>(a->stream) < reinterpret_cast<uintptr_t>(b->stream);
    if (a->size != b->size) return a->size < b->size;
    return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
  }
};
}  // namespace

struct Pool {
  explicit Pool(bool small, PrivatePool* private_owner = nullptr) : is_small(small), owner(private_owner) {}
  std::set<Block*, BlockLess> blocks;  // the free blocks
  const bool is_small;
  PrivatePool* const owner;  // the graph private pool this is part of, or nullptr (the general pool)
  uint64_t searches = 0;  // get_free_block calls: the clock of garbage collection ages
};

// A graph's private pool (Note [Graph private pools]): segments of its own, in pools of its own.
struct PrivatePool {
  explicit PrivatePool(MempoolId pool_id) : id(pool_id), small(true, this), large(false, this) {}
  const MempoolId id;
  int use_count = 1;      // graphs (captures) using it; 0: freeable
  int segment_count = 0;  // its segments still held from the device
  Pool small, large;
};

namespace {
constexpr size_t kMaxRequest = size_t(1) << 62;  // beyond any device; keeps the rounding from overflowing
}

// ---- construction --------------------------------------------------------------------------------

CachingBlockAllocator::CachingBlockAllocator(int device, std::unique_ptr<AllocBackend> backend, AllocConf conf)
    : device_(device),
      backend_(std::move(backend)),
      conf_(conf),
      small_(std::make_unique<Pool>(true)),
      large_(std::make_unique<Pool>(false)) {
  stats_.max_split_size = conf_.max_split_size == std::numeric_limits<size_t>::max()
                              ? -1
                              : static_cast<int64_t>(conf_.max_split_size);
}

CachingBlockAllocator::~CachingBlockAllocator() {
  try {
    for (auto& se : events_)
      for (auto& [ev, b] : se.events) {
        backend_->event_wait(ev);
        backend_->release_event(ev);
      }
    for (auto& [addr, seg] : segments_) {
      for (Block* b = seg->head; b;) {
        Block* n = b->next;
        delete b;
        b = n;
      }
      backend_->raw_free(seg->ptr);
      delete seg;
    }
  } catch (...) {
    // A device error at shutdown: the memory goes with the process.
  }
  for (Block* b : spare_blocks_) delete b;
}

Block* CachingBlockAllocator::new_block() {
  if (spare_blocks_.empty()) return new Block();
  Block* b = spare_blocks_.back();
  spare_blocks_.pop_back();
  return b;
}

void CachingBlockAllocator::recycle(Block* b) {
  b->stream_uses.clear();
  std::vector<void*> keep = std::move(b->stream_uses);
  *b = Block();
  b->stream_uses = std::move(keep);  // keeps its capacity, if any
  spare_blocks_.push_back(b);
}

void CachingBlockAllocator::update(StatArray& stat, const Pool& pool, int64_t delta) {
  stat[kAllPools].update(delta);
  stat[pool.is_small ? kSmallPool : kLargePool].update(delta);
}

CachingBlockAllocator* CachingBlockAllocator::owner(const Block* b) { return b->segment->owner; }
void* CachingBlockAllocator::address(const Block* b) { return b->ptr; }
size_t CachingBlockAllocator::block_size(const Block* b) { return b->size; }

// ---- sizes -----------------------------------------------------------------------------------------

size_t CachingBlockAllocator::round_size(size_t n) const {
  if (n < kMinBlockSize) return kMinBlockSize;
  const size_t divisions = conf_.divisions_for(n);
  if (divisions > 1 && n > kMinBlockSize * divisions) {
    // One of `divisions` equal steps between the powers of two around n.
    if (std::has_single_bit(n)) return n;
    const size_t floor = std::bit_floor(n);
    const size_t step = floor / divisions;
    if (step == 0) return floor << 1;
    const size_t down = n & ~(step - 1);
    return down == n ? n : down + step;
  }
  return kMinBlockSize * ((n + kMinBlockSize - 1) / kMinBlockSize);
}

size_t CachingBlockAllocator::segment_size_for(size_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

bool CachingBlockAllocator::should_split(const Block* b, size_t size) const {
  const size_t remaining = b->size - size;
  if (b->pool->is_small) return remaining >= kMinBlockSize;
  return size < conf_.max_split_size && remaining > kSmallSize;
}

// ---- malloc ----------------------------------------------------------------------------------------

Block* CachingBlockAllocator::malloc(size_t nbytes, void* stream) {
  if (nbytes == 0) return nullptr;
  Lock g(mu_);
  // While a capture is underway the device is neither queried nor synchronized, and memory is not
  // released (Note [Graph private pools]).
  const bool capturing = !captures_underway_.empty();
  PrivatePool* priv = nullptr;
  if (capturing) [[unlikely]] {
    priv = pool_for_capture(stream);
  } else {
    if (!deferred_.empty()) [[unlikely]] insert_deferred_events();
    if (pending_events_ > 0) [[unlikely]] process_events();
  }
  if (nbytes > kMaxRequest) [[unlikely]] raise_oom(nbytes);
  if (!conf_.use_cache && !priv) [[unlikely]] return malloc_uncached(nbytes, stream);
  const size_t size = round_size(nbytes);
  Pool& pool = priv ? (size <= kSmallSize ? priv->small : priv->large) : (size <= kSmallSize ? *small_ : *large_);
  Block* b = get_free_block(pool, size, stream);
  if (!b) [[unlikely]] {
    const size_t alloc_size = segment_size_for(size);
    if (conf_.garbage_collection_threshold > 0 && !capturing) garbage_collect();
    b = alloc_segment(pool, alloc_size, stream, false);
    if (!capturing) {
      if (!b && release_available_cached_blocks(pool, size, stream))
        b = alloc_segment(pool, alloc_size, stream, false);
      if (!b) {
        release_cached_blocks();
        b = alloc_segment(pool, alloc_size, stream, true);
      }
    }
    if (!b) raise_oom(alloc_size);
  }
  return take_block(b, pool, size, nbytes);
}

Block* CachingBlockAllocator::malloc_uncached(size_t nbytes, void* stream) {
  const size_t size = kMinBlockSize * ((nbytes + kMinBlockSize - 1) / kMinBlockSize);
  Pool& pool = size <= kSmallSize ? *small_ : *large_;
  Block* b = alloc_segment(pool, size, stream, false);
  if (!b) raise_oom(size);
  return take_block(b, pool, size, nbytes);
}

Block* CachingBlockAllocator::get_free_block(Pool& pool, size_t size, void* stream) {
  ++pool.searches;
  Block key;
  key.stream = stream;
  key.size = size;
  auto it = pool.blocks.lower_bound(&key);
  if (it == pool.blocks.end() || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  // A request below max_split never takes an (unsplittable) oversize block; an oversize request takes
  // one only if it wastes less than a large segment.
  if (size < conf_.max_split_size && b->size >= conf_.max_split_size) return nullptr;
  if (size >= conf_.max_split_size && b->size >= size + kLargeBuffer) return nullptr;
  pool.blocks.erase(it);
  return b;
}

Block* CachingBlockAllocator::alloc_segment(Pool& pool, size_t alloc_size, void* stream, bool is_retry) {
  if (is_retry) ++stats_.num_alloc_retries;
  if (fraction_set_ && reserved_ + alloc_size > allowed_max_) return nullptr;
  void* p = backend_->raw_alloc(alloc_size);
  if (!p) return nullptr;
  ++stats_.num_device_alloc;
  if (pool.owner) ++pool.owner->segment_count;
  auto* seg = new Segment();
  seg->owner = this;
  seg->ptr = static_cast<char*>(p);
  seg->size = alloc_size;
  seg->stream = stream;
  seg->pool = &pool;
  Block* b = new_block();
  b->ptr = seg->ptr;
  b->size = alloc_size;
  b->stream = stream;
  b->pool = &pool;
  b->segment = seg;
  seg->head = b;
  segments_.emplace(reinterpret_cast<uintptr_t>(p), seg);
  reserved_ += alloc_size;
  update(stats_.segment, pool, 1);
  update(stats_.reserved_bytes, pool, static_cast<int64_t>(alloc_size));
  if (alloc_size >= conf_.max_split_size) stats_.oversize_segments.update(1);
  return b;
}

// Hands out `b` (just taken from the pool or a new segment), splitting off what the request does not need.
Block* CachingBlockAllocator::take_block(Block* b, Pool& pool, size_t size, size_t requested) {
  const bool already_split = b->is_split();
  Block* block = b;
  if ((conf_.use_cache || pool.owner) && should_split(b, size)) {
    // The front part becomes the allocated block; `b` keeps the rest and goes back to the pool.
    Block* remaining = b;
    block = new_block();
    block->ptr = remaining->ptr;
    block->size = size;
    block->stream = remaining->stream;
    block->pool = remaining->pool;
    block->segment = remaining->segment;
    block->prev = remaining->prev;
    if (block->prev) {
      block->prev->next = block;
    } else {
      block->segment->head = block;
    }
    block->next = remaining;
    remaining->prev = block;
    remaining->ptr += size;
    remaining->size -= size;
    remaining->gc_base = pool.searches;
    pool.blocks.insert(remaining);
    if (already_split) {
      update(stats_.inactive_split_bytes, pool, -static_cast<int64_t>(size));  // an inactive split block shrank
    } else {
      update(stats_.inactive_split_bytes, pool, static_cast<int64_t>(remaining->size));
      update(stats_.inactive_split, pool, 1);
    }
  } else if (already_split) {
    update(stats_.inactive_split_bytes, pool, -static_cast<int64_t>(b->size));
    update(stats_.inactive_split, pool, -1);
  }
  block->allocated = true;
  block->requested_size = requested;
  const auto bytes = static_cast<int64_t>(block->size);
  update(stats_.allocation, pool, 1);
  update(stats_.allocated_bytes, pool, bytes);
  update(stats_.active, pool, 1);
  update(stats_.active_bytes, pool, bytes);
  update(stats_.requested_bytes, pool, static_cast<int64_t>(requested));
  if (block->size >= conf_.max_split_size) stats_.oversize_allocations.update(1);
  return block;
}

// ---- free ------------------------------------------------------------------------------------------

void CachingBlockAllocator::free(Block* block) {
  if (!block) return;
  Lock g(mu_);
  TS_CHECK(block->allocated, ValueError, "CUDA caching allocator: a block was freed twice");
  Pool& pool = *block->pool;
  block->allocated = false;
  update(stats_.allocation, pool, -1);
  update(stats_.allocated_bytes, pool, -static_cast<int64_t>(block->size));
  update(stats_.requested_bytes, pool, -static_cast<int64_t>(block->requested_size));
  if (block->size >= conf_.max_split_size) stats_.oversize_allocations.update(-1);
  const bool uncached = !conf_.use_cache && !pool.owner;
  if (!captures_underway_.empty() && (uncached || !block->stream_uses.empty())) [[unlikely]] {
    // An event recorded now could not be queried, and cudaFree would synchronize: wait for the end of
    // the capture, still active (Note [Graph private pools]).
    block->deferred = true;
    deferred_.push_back(block);
    return;
  }
  if (uncached) {
    // cudaFree waits for the device, so other streams are done with the memory.
    update(stats_.active, pool, -1);
    update(stats_.active_bytes, pool, -static_cast<int64_t>(block->size));
    release_segment(block);
    return;
  }
  if (!block->stream_uses.empty()) {
    insert_events(block);
  } else {
    free_block(block);
  }
}

// The frees deferred by captures, now that none is underway: as free() would have done them.
void CachingBlockAllocator::insert_deferred_events() {
  std::vector<Block*> blocks = std::move(deferred_);
  deferred_.clear();
  for (Block* b : blocks) {
    b->deferred = false;
    if (!conf_.use_cache && !b->pool->owner) {
      update(stats_.active, *b->pool, -1);
      update(stats_.active_bytes, *b->pool, -static_cast<int64_t>(b->size));
      release_segment(b);
    } else if (!b->stream_uses.empty()) {
      insert_events(b);
    } else {
      free_block(b);
    }
  }
}

// A block that no stream uses any more goes back to its pool, merged with free neighbours.
void CachingBlockAllocator::free_block(Block* block) {
  Pool& pool = *block->pool;
  const auto original = static_cast<int64_t>(block->size);
  int64_t split_count = 0, split_bytes = 0;
  for (Block* candidate : {block->prev, block->next}) {
    const size_t subsumed = try_merge(block, candidate, pool);
    if (subsumed > 0) {
      split_count -= 1;
      split_bytes -= static_cast<int64_t>(subsumed);
    }
  }
  block->requested_size = 0;
  block->gc_base = pool.searches;
  pool.blocks.insert(block);
  if (block->is_split()) {
    split_count += 1;
    split_bytes += static_cast<int64_t>(block->size);
  }
  if (split_count) update(stats_.inactive_split, pool, split_count);
  if (split_bytes) update(stats_.inactive_split_bytes, pool, split_bytes);
  update(stats_.active, pool, -1);
  update(stats_.active_bytes, pool, -original);
}

// Folds the free neighbour `src` into `dst` (which is not in the pool); returns the bytes gained.
size_t CachingBlockAllocator::try_merge(Block* dst, Block* src, Pool& pool) {
  if (!src || src->active() || !src->stream_uses.empty()) return 0;
  pool.blocks.erase(src);
  if (dst->prev == src) {
    dst->ptr = src->ptr;
    dst->prev = src->prev;
    if (dst->prev) {
      dst->prev->next = dst;
    } else {
      dst->segment->head = dst;
    }
  } else {
    dst->next = src->next;
    if (dst->next) dst->next->prev = dst;
  }
  const size_t subsumed = src->size;
  dst->size += subsumed;
  recycle(src);
  return subsumed;
}

// ---- streams and events ----------------------------------------------------------------------------

Block* CachingBlockAllocator::find_allocated_locked(uintptr_t addr) {
  auto it = segments_.upper_bound(addr);
  if (it == segments_.begin()) return nullptr;
  --it;
  Segment* seg = it->second;
  if (addr >= reinterpret_cast<uintptr_t>(seg->ptr) + seg->size) return nullptr;
  for (Block* b = seg->head; b; b = b->next) {
    const auto lo = reinterpret_cast<uintptr_t>(b->ptr);
    if (addr >= lo && addr < lo + b->size) return b->allocated ? b : nullptr;
  }
  return nullptr;
}

Block* CachingBlockAllocator::find_allocated(const void* ptr) {
  Lock g(mu_);
  return find_allocated_locked(reinterpret_cast<uintptr_t>(ptr));
}

void CachingBlockAllocator::add_stream_use(Block* block, void* stream) {
  if (stream == block->stream) return;
  if (std::find(block->stream_uses.begin(), block->stream_uses.end(), stream) == block->stream_uses.end())
    block->stream_uses.push_back(stream);
}

void CachingBlockAllocator::record_stream(Block* block, void* stream) {
  Lock g(mu_);
  TS_CHECK(block->allocated, ValueError, "record_stream: the memory was already freed");
  add_stream_use(block, stream);
}

bool CachingBlockAllocator::record_stream(const void* ptr, void* stream) {
  Lock g(mu_);
  Block* b = find_allocated_locked(reinterpret_cast<uintptr_t>(ptr));
  if (!b) return false;
  add_stream_use(b, stream);
  return true;
}

void CachingBlockAllocator::insert_events(Block* block) {
  std::vector<void*> streams = std::move(block->stream_uses);
  block->stream_uses.clear();
  for (void* s : streams) {
    void* ev = backend_->record_event(s);
    auto it = std::find_if(events_.begin(), events_.end(), [&](const StreamEvents& e) { return e.stream == s; });
    if (it == events_.end()) {
      events_.push_back(StreamEvents{s, {}});
      it = events_.end() - 1;
    }
    it->events.emplace_back(ev, block);
    ++block->event_count;
    ++pending_events_;
  }
}

// Frees the blocks whose events have all completed. Events of one stream complete in order, so each
// stream's queue is read up to its first unfinished event.
void CachingBlockAllocator::process_events() {
  for (auto& se : events_) {
    while (!se.events.empty()) {
      auto [ev, block] = se.events.front();
      if (!backend_->event_done(ev)) break;
      backend_->release_event(ev);
      se.events.pop_front();
      --pending_events_;
      if (--block->event_count == 0) free_block(block);
    }
  }
  std::erase_if(events_, [](const StreamEvents& e) { return e.events.empty(); });
}

void CachingBlockAllocator::synchronize_and_free_events() {
  ++stats_.num_sync_all_streams;
  for (auto& se : events_) {
    for (auto& [ev, block] : se.events) {
      backend_->event_wait(ev);
      backend_->release_event(ev);
      --pending_events_;
      if (--block->event_count == 0) free_block(block);
    }
  }
  events_.clear();
}

size_t CachingBlockAllocator::pending_events() {
  Lock g(mu_);
  return pending_events_;
}

// ---- releasing cached memory -------------------------------------------------------------------------

void CachingBlockAllocator::release_segment(Block* block) {
  Segment* seg = block->segment;
  Pool& pool = *seg->pool;
  backend_->raw_free(seg->ptr);
  ++stats_.num_device_free;
  if (pool.owner) --pool.owner->segment_count;
  reserved_ -= seg->size;
  update(stats_.segment, pool, -1);
  update(stats_.reserved_bytes, pool, -static_cast<int64_t>(seg->size));
  if (seg->size >= conf_.max_split_size) stats_.oversize_segments.update(-1);
  segments_.erase(reinterpret_cast<uintptr_t>(seg->ptr));
  delete seg;
  recycle(block);
}

// With max_split_size: releases the smallest cached oversize block of the stream that covers the
// request, or else oversize blocks from the largest down until as much has been released.
bool CachingBlockAllocator::release_available_cached_blocks(Pool& pool, size_t size, void* stream) {
  if (conf_.max_split_size == std::numeric_limits<size_t>::max()) return false;
  Block key;
  key.stream = stream;
  key.size = std::max(size, conf_.max_split_size);
  auto it = pool.blocks.lower_bound(&key);
  if (it != pool.blocks.end() && (*it)->stream == stream) {
    Block* b = *it;
    if (b->is_split()) return false;
    pool.blocks.erase(it);
    release_segment(b);
    return true;
  }
  if (it == pool.blocks.begin()) return false;
  size_t released = 0;
  --it;  // the largest block of the stream, if any
  while (released < key.size && (*it)->size >= conf_.max_split_size && (*it)->stream == stream) {
    auto cur = it;
    const bool first = cur == pool.blocks.begin();
    if (!first) --it;
    Block* b = *cur;
    if (!b->is_split()) {  // oversize blocks are whole segments (they are never split)
      released += b->size;
      pool.blocks.erase(cur);
      release_segment(b);
    }
    if (first) break;
  }
  return released >= key.size;
}

void CachingBlockAllocator::release_whole_blocks(Pool& pool) {
  for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
    Block* b = *it;
    if (b->is_split()) {
      ++it;
      continue;
    }
    it = pool.blocks.erase(it);
    release_segment(b);
  }
}

void CachingBlockAllocator::release_cached_blocks() {
  if (!deferred_.empty()) insert_deferred_events();
  synchronize_and_free_events();
  release_whole_blocks(*large_);
  release_whole_blocks(*small_);
  release_freeable_pools_locked();
}

void CachingBlockAllocator::empty_cache() {
  Lock g(mu_);
  TS_CHECK(captures_underway_.empty(), ValueError, "empty_cache: cannot synchronize the device while a CUDA graph is "
           "being captured (release cached memory before capture_begin or after capture_end)");
  release_cached_blocks();
}

// ---- graph private pools ------------------------------------------------------------------------------

PrivatePool* CachingBlockAllocator::pool_for_capture(void* stream) {
  for (auto& [id, filter] : captures_underway_) {
    if (filter(stream)) {
      auto it = private_pools_.find(id);
      return it == private_pools_.end() ? nullptr : it->second.get();
    }
  }
  return nullptr;
}

void CachingBlockAllocator::begin_allocate_to_pool(MempoolId id, StreamFilter filter) {
  TS_CHECK((id != MempoolId{0, 0}), ValueError, "begin_allocate_to_pool: the null pool id {0, 0} names no private pool");
  Lock g(mu_);
  for (const auto& c : captures_underway_)
    TS_CHECK(c.first != id, ValueError, "begin_allocate_to_pool: pool (", id.first, ", ", id.second,
             ") is already being allocated to by a capture underway");
  auto it = private_pools_.find(id);
  if (it == private_pools_.end()) {
    private_pools_.emplace(id, std::make_unique<PrivatePool>(id));
  } else {
    ++it->second->use_count;  // shared by graphs captured in order (or a freeable pool taken up again)
  }
  captures_underway_.emplace_back(id, std::move(filter));
}

void CachingBlockAllocator::end_allocate_to_pool(MempoolId id) {
  Lock g(mu_);
  auto it = std::find_if(captures_underway_.begin(), captures_underway_.end(),
                         [&](const auto& c) { return c.first == id; });
  TS_CHECK(it != captures_underway_.end(), ValueError, "end_allocate_to_pool: pool (", id.first, ", ", id.second,
           ") is not being allocated to");
  captures_underway_.erase(it);
  // The capture has ended (the CUDA layer closes the pool after cudaStreamEndCapture): the frees it
  // deferred may record their events now.
  if (captures_underway_.empty() && !deferred_.empty()) insert_deferred_events();
}

void CachingBlockAllocator::release_pool(MempoolId id) {
  Lock g(mu_);
  auto it = private_pools_.find(id);
  TS_CHECK(it != private_pools_.end() && it->second->use_count > 0, ValueError, "release_pool: pool (", id.first, ", ",
           id.second, ") is not in use");
  PrivatePool& pp = *it->second;
  if (--pp.use_count == 0 && pp.segment_count == 0) {
    for (const auto& c : captures_underway_)
      if (c.first == id) return;  // released before its capture ended: kept until then
    private_pools_.erase(it);
  }
}

void CachingBlockAllocator::release_freeable_pools() {
  Lock g(mu_);
  if (captures_underway_.empty()) release_freeable_pools_locked();
}

void CachingBlockAllocator::release_freeable_pools_locked() {
  for (auto it = private_pools_.begin(); it != private_pools_.end();) {
    PrivatePool& pp = *it->second;
    const bool open = std::any_of(captures_underway_.begin(), captures_underway_.end(),
                                  [&](const auto& c) { return c.first == pp.id; });
    if (pp.use_count > 0 || open) {
      ++it;
      continue;
    }
    release_whole_blocks(pp.large);
    release_whole_blocks(pp.small);
    it = pp.segment_count == 0 ? private_pools_.erase(it) : std::next(it);
  }
}

bool CachingBlockAllocator::capture_underway() {
  Lock g(mu_);
  return !captures_underway_.empty();
}

size_t CachingBlockAllocator::num_private_pools() {
  Lock g(mu_);
  return private_pools_.size();
}

int CachingBlockAllocator::pool_use_count(MempoolId id) {
  Lock g(mu_);
  auto it = private_pools_.find(id);
  return it == private_pools_.end() ? 0 : it->second->use_count;
}

size_t CachingBlockAllocator::deferred_frees() {
  Lock g(mu_);
  return deferred_.size();
}

MempoolId CachingBlockAllocator::pool_id(const Block* b) {
  return b->pool->owner ? b->pool->owner->id : MempoolId{0, 0};
}

MempoolId CachingBlockAllocator::segment_pool_id(uintptr_t segment_address) {
  Lock g(mu_);
  auto it = segments_.find(segment_address);
  TS_CHECK(it != segments_.end(), ValueError, "segment_pool_id: no segment at that address");
  const Pool* p = it->second->pool;
  return p->owner ? p->owner->id : MempoolId{0, 0};
}

size_t CachingBlockAllocator::total_memory() {
  if (total_memory_ == 0) {
    size_t free_bytes = 0;
    backend_->mem_info(&free_bytes, &total_memory_);
  }
  return total_memory_;
}

void CachingBlockAllocator::set_memory_fraction(double fraction) {
  TS_CHECK(fraction >= 0.0 && fraction <= 1.0, ValueError, "set_per_process_memory_fraction: invalid fraction ",
           fraction, " (allowed range: 0 to 1)");
  Lock g(mu_);
  allowed_max_ = static_cast<size_t>(fraction * static_cast<double>(total_memory()));
  fraction_set_ = true;
}

// Releases whole cached large segments that have gone unused longest (their age is the number of pool
// searches since they were freed), above-average age first, until reserved memory is back under the
// threshold or nothing is left to release. It does not wait for events.
void CachingBlockAllocator::garbage_collect() {
  const size_t allowed = fraction_set_ ? allowed_max_ : total_memory();
  const auto threshold = static_cast<size_t>(conf_.garbage_collection_threshold * static_cast<double>(allowed));
  if (reserved_ <= threshold) return;
  const size_t target = reserved_ - threshold;
  Pool& pool = *large_;
  uint64_t total_age = 0;
  size_t freeable = 0;
  for (Block* b : pool.blocks) {
    if (!b->is_split()) {
      total_age += pool.searches - b->gc_base;
      ++freeable;
    }
  }
  size_t reclaimed = 0;
  bool freed_one = true;
  while (reclaimed < target && freed_one && freeable > 0) {
    const double age_threshold = static_cast<double>(total_age) / static_cast<double>(freeable);
    freed_one = false;
    for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
      Block* b = *it;
      const uint64_t age = pool.searches - b->gc_base;
      if (!b->is_split() && static_cast<double>(age) >= age_threshold) {
        freed_one = true;
        reclaimed += b->size;
        total_age -= age;
        --freeable;
        it = pool.blocks.erase(it);
        release_segment(b);
      } else {
        ++it;
      }
    }
  }
}

void CachingBlockAllocator::raise_oom(size_t alloc_size) {
  size_t free_bytes = 0, total_bytes = 0;
  backend_->mem_info(&free_bytes, &total_bytes);
  ++stats_.num_ooms;
  const int64_t allocated = stats_.allocated_bytes[kAllPools].current;
  const int64_t reserved = stats_.reserved_bytes[kAllPools].current;
  std::string allowed;
  if (fraction_set_) allowed = format_size(allowed_max_) + " allowed; ";
  TS_THROW(OutOfMemoryError, "CUDA out of memory. Tried to allocate ", format_size(alloc_size), ". GPU ", device_,
           " has a total capacity of ", format_size(total_bytes), " of which ", format_size(free_bytes), " is free. ",
           allowed, "Of the allocated memory ", format_size(static_cast<uint64_t>(allocated)),
           " is allocated by tessera, and ", format_size(static_cast<uint64_t>(reserved - allocated)),
           " is reserved by tessera but unallocated. If reserved but unallocated memory is large try setting "
           "max_split_size_mb in TESSERA_CUDA_ALLOC_CONF to avoid fragmentation.");
}

// ---- statistics and snapshots ------------------------------------------------------------------------

DeviceStats CachingBlockAllocator::stats() {
  Lock g(mu_);
  return stats_;
}

void CachingBlockAllocator::reset_peak_stats() {
  Lock g(mu_);
  for (StatArray* a : {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split,
                       &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
                       &stats_.inactive_split_bytes, &stats_.requested_bytes})
    for (Stat& s : *a) s.peak = s.current;
  stats_.oversize_allocations.peak = stats_.oversize_allocations.current;
  stats_.oversize_segments.peak = stats_.oversize_segments.current;
}

void CachingBlockAllocator::reset_accumulated_stats() {
  Lock g(mu_);
  for (StatArray* a : {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split,
                       &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
                       &stats_.inactive_split_bytes, &stats_.requested_bytes})
    for (Stat& s : *a) s.allocated = s.freed = 0;
  for (Stat* s : {&stats_.oversize_allocations, &stats_.oversize_segments}) s->allocated = s->freed = 0;
  stats_.num_alloc_retries = stats_.num_ooms = stats_.num_sync_all_streams = 0;
  stats_.num_device_alloc = stats_.num_device_free = 0;
}

std::vector<cuda::SegmentInfo> CachingBlockAllocator::snapshot() {
  Lock g(mu_);
  std::vector<cuda::SegmentInfo> out;
  out.reserve(segments_.size());
  for (const auto& [addr, seg] : segments_) {
    cuda::SegmentInfo s;
    s.device = device_;
    s.address = addr;
    s.total_size = static_cast<int64_t>(seg->size);
    s.is_large = !seg->pool->is_small;
    s.stream = seg->stream;
    for (const Block* b = seg->head; b; b = b->next) {
      cuda::BlockInfo bi;
      bi.address = reinterpret_cast<uintptr_t>(b->ptr);
      bi.size = static_cast<int64_t>(b->size);
      bi.allocated = b->allocated;
      bi.active = b->active();
      bi.requested_size = b->allocated ? static_cast<int64_t>(b->requested_size) : 0;
      if (b->allocated) s.allocated_size += bi.size;
      if (bi.active) s.active_size += bi.size;
      s.requested_size += bi.requested_size;
      s.blocks.push_back(bi);
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace tessera::alloc
