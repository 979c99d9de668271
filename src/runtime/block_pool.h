// The caching allocator's pool logic for one device, free of CUDA: the CUDA layer
// (runtime/cuda/caching_allocator.cpp) plugs cudaMalloc, cudaFree and events in through AllocBackend,
// and tests (tests/runtime/test_block_pool.cpp) plug in a fake device.
//
// Note [CUDA caching allocator]
// cudaMalloc and cudaFree are slow and synchronize the device, so freed device memory is kept and reused,
// as PyTorch's CUDACachingAllocator does (same sizes, same rules, same statistics names):
//  * Segments are what cudaMalloc returned; each is cut into a doubly linked list of Blocks in address
//    order. A block is allocated, free (in a pool, reusable), or awaiting events (freed by its owner
//    but still possibly read by other streams; see below).
//  * Requests round up to 512 B (or, with roundup_power2_divisions:N, to one of N steps between powers
//    of two). Requests of at most 1 MiB use the small pool, cut from 2 MiB segments; larger ones the large
//    pool, cut from 20 MiB segments for requests under 10 MiB, else from a segment of the request rounded
//    up to 2 MiB.
//  * A block belongs to the stream current when it was allocated: each pool is ordered by (stream, size,
//    address), and a request takes the smallest free block of its stream that fits (best fit). Memory is
//    never handed to another stream without an event, so kernels on the owning stream need no
//    synchronization: stream order is enough.
//  * A free block larger than the request is split when the remainder is worth keeping (>= 512 B in the
//    small pool, > 1 MiB in the large pool); the remainder goes back to the pool. A freed block merges
//    with free neighbours of its segment, so a segment whose blocks are all free is one block again.
//  * max_split_size: blocks of that size and more are never split, a request below it never takes one,
//    and a request above it takes a cached block only if less than 20 MiB larger (bounded waste).
//  * record_stream(block, s) notes that stream s (not the owner) uses the block. Freeing such a block
//    records one event on each of those streams; the block returns to the pool only once all have
//    completed. Events are polled (never waited for) at the start of each allocation.
//  * When the device has no memory for a new segment: first release cached oversize blocks (with
//    max_split_size), then wait for all pending events and release every cached segment whose blocks
//    are all free, and retry once (num_alloc_retries); then raise OutOfMemoryError with PyTorch's facts.
//    set_memory_fraction(f) makes any segment that would take the reserved memory past f * total fail
//    the same way without asking the device. garbage_collection_threshold releases cached whole large
//    segments, the least recently reused first, once reserved memory exceeds threshold * allowed.
//  * Statistics (DeviceStats) are kept incrementally; each (current) value equals a sum over the
//    snapshot: allocated = allocated blocks; active = allocated + awaiting events; reserved = segments;
//    inactive_split = free blocks of segments cut in more than one block; requested = the sizes asked
//    for by the allocated blocks' owners.
//  * With backend:cudaMalloc (AllocConf::use_cache false) every request is its own segment and every
//    free returns it to the device at once (cudaFree waits for the device, so streams are safe).
//  * One mutex per device guards everything; the allocate-free path of a cached block takes the lock
//    twice, searches one ordered set and recycles Block objects (no other heap allocation).
//
// Note [Graph private pools]
// A CUDA graph replays the addresses it was captured with, so memory allocated during its capture must
// stay the graph's for as long as the graph may be replayed. As PyTorch's allocator does:
//  * A private pool (MempoolId, PyTorch's (uint64, uint64) pair) has its own small and large Pools and
//    its own segments: a block of a private pool is never handed to an allocation outside it, and a
//    general block never to an allocation inside it. Blocks freed during or after the capture go back
//    to the private pool, where later captures into the same pool (graphs captured in order, sharing
//    a pool: graph_pool_handle()) may reuse them.
//  * begin_allocate_to_pool(id, filter) opens the pool (created with one use, or one more use of an
//    existing pool) for every request whose stream the filter accepts (the stream being captured,
//    and streams forked into its capture); end_allocate_to_pool(id) closes it again.
//  * release_pool(id) drops one use; a pool without uses is "freeable": its segments whose blocks are
//    all free go back to the device at the next cache release (empty_cache, an out-of-memory retry,
//    release_freeable_pools() -- which a capture calls before it begins), and the pool itself goes once
//    it has no segment left. Blocks still allocated (outputs the user keeps) return to it when freed.
//  * While any capture is underway on the device nothing may synchronize or query the device for
//    earlier work: events are not polled, a record_stream free records no event (the block waits,
//    still active, until no capture is underway: PyTorch's deferral), no cached memory is released
//    (garbage collection, the out-of-memory retry), and empty_cache raises. A new segment is still
//    allowed (the CUDA layer switches the thread to relaxed capture mode around cudaMalloc).
//  * Private pools always cache (even under backend:cudaMalloc, whose general frees are deferred the
//    same way while a capture is underway: cudaFree would synchronize).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "runtime/alloc_conf.h"
#include "tessera/cuda.h"

namespace tessera::alloc {

inline constexpr size_t kMinBlockSize = 512;               // every request rounds up to a multiple of this
inline constexpr size_t kSmallSize = size_t(1) << 20;      // largest request of the small pool
inline constexpr size_t kSmallBuffer = size_t(2) << 20;    // small pool segment size
inline constexpr size_t kLargeBuffer = size_t(20) << 20;   // segment size for large requests under 10 MiB
inline constexpr size_t kMinLargeAlloc = size_t(10) << 20; // requests from here get a segment of their own
inline constexpr size_t kRoundLarge = size_t(2) << 20;     // ... rounded up to this

// What the pool needs from a device. Called with the allocator's lock held.
class AllocBackend {
 public:
  virtual ~AllocBackend() = default;
  // A new segment, or nullptr when the device is out of memory (the device error is cleared). Other
  // failures raise.
  virtual void* raw_alloc(size_t nbytes) = 0;
  virtual void raw_free(void* ptr) = 0;
  // An event marking the work queued on `stream` up to now.
  virtual void* record_event(void* stream) = 0;
  virtual bool event_done(void* event) = 0;     // never blocks
  virtual void event_wait(void* event) = 0;     // blocks the calling thread until it completes
  virtual void release_event(void* event) = 0;  // the pool is done with it (the backend may reuse it)
  virtual void mem_info(size_t* free_bytes, size_t* total_bytes) = 0;
};

// One statistic, as PyTorch's: current value, its peak, and the sums of all increases and decreases.
struct Stat {
  int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  void update(int64_t delta) {
    current += delta;
    if (current > peak) peak = current;
    if (delta > 0) allocated += delta; else freed -= delta;
  }
};
enum StatType : int { kAllPools = 0, kSmallPool = 1, kLargePool = 2 };
inline constexpr int kNumStatTypes = 3;
using StatArray = std::array<Stat, kNumStatTypes>;

struct DeviceStats {
  StatArray allocation, segment, active, inactive_split;  // counts of blocks / segments
  StatArray allocated_bytes, reserved_bytes, active_bytes, inactive_split_bytes, requested_bytes;
  Stat oversize_allocations, oversize_segments;  // blocks / segments of max_split_size or more
  int64_t num_alloc_retries = 0;     // new segments asked for after releasing the whole cache
  int64_t num_ooms = 0;              // OutOfMemoryErrors raised
  int64_t num_sync_all_streams = 0;  // waits for every pending event (cache releases)
  int64_t num_device_alloc = 0;      // cudaMalloc calls that succeeded
  int64_t num_device_free = 0;       // cudaFree calls
  int64_t max_split_size = -1;       // the setting, in bytes (-1: unlimited)
};

// PyTorch's key names: "allocated_bytes.all.current", "segment.large_pool.peak", "num_ooms", ...
std::map<std::string, int64_t> stats_as_map(const DeviceStats& s);
// PyTorch's format of sizes in messages: "512 bytes", "1.50 KiB", "20.00 MiB", "79.19 GiB".
std::string format_size(uint64_t bytes);
// A readable table of the statistics, as torch.cuda.memory_summary().
std::string memory_summary_table(const DeviceStats& s, int device);

// A private memory pool's id, as PyTorch's MempoolId_t; {0, 0} is none (the general pool).
using MempoolId = std::pair<uint64_t, uint64_t>;
// Which streams' requests go to a pool while it is open (a cudaStream_t as void*).
using StreamFilter = std::function<bool(void* stream)>;

struct Block;     // the allocator's own; Block* is what malloc returns and free takes
struct Segment;
struct Pool;
struct PrivatePool;

class CachingBlockAllocator {
 public:
  CachingBlockAllocator(int device, std::unique_ptr<AllocBackend> backend, AllocConf conf = {});
  // Returns every segment to the backend (blocks still allocated become invalid).
  ~CachingBlockAllocator();
  CachingBlockAllocator(const CachingBlockAllocator&) = delete;
  CachingBlockAllocator& operator=(const CachingBlockAllocator&) = delete;

  // A block of at least `nbytes` owned by `stream`; nullptr for 0 bytes. Raises OutOfMemoryError.
  Block* malloc(size_t nbytes, void* stream);
  // Gives a block back (see record_stream for when it becomes reusable).
  void free(Block* block);
  // The allocator a block came from and its address, without taking a lock.
  static CachingBlockAllocator* owner(const Block* block);
  static void* address(const Block* block);
  static size_t block_size(const Block* block);

  // The allocated block whose memory holds `ptr`, or nullptr when none of this allocator's does.
  Block* find_allocated(const void* ptr);
  // `stream` uses the block too: when freed it is reused only after the work queued on `stream` up to
  // the free has completed. The block's own stream is ignored.
  void record_stream(Block* block, void* stream);
  // record_stream for the allocated block holding `ptr`; false when this allocator has none.
  bool record_stream(const void* ptr, void* stream);

  // Waits for pending events, then returns every segment whose blocks are all free to the device.
  void empty_cache();
  // New segments fail once the reserved memory would exceed fraction * total (ValueError outside [0, 1]).
  void set_memory_fraction(double fraction);

  DeviceStats stats();
  void reset_peak_stats();
  void reset_accumulated_stats();
  std::vector<cuda::SegmentInfo> snapshot();
  const AllocConf& conf() const { return conf_; }
  int device() const { return device_; }
  // Events recorded by record_stream frees that have not been seen to complete.
  size_t pending_events();

  // ---- graph private pools (Note [Graph private pools]) ----
  // Requests whose stream `filter` accepts come from pool `id` until end_allocate_to_pool(id). Creates
  // the pool with one use, or adds a use to an existing one. ValueError for the null id or a pool open
  // already.
  void begin_allocate_to_pool(MempoolId id, StreamFilter filter);
  void end_allocate_to_pool(MempoolId id);
  // Drops one use of the pool; ValueError for an unknown pool or one without uses.
  void release_pool(MempoolId id);
  // Returns to the device the whole free segments of pools without uses (no-op while a capture is
  // underway). Waits for nothing: the device's cudaFree does.
  void release_freeable_pools();
  bool capture_underway();
  // Pools known to the allocator (with uses, or freeable with segments left), and the uses of one (0 for
  // an unknown or freeable pool).
  size_t num_private_pools();
  int pool_use_count(MempoolId id);
  // Blocks freed with record_stream uses during a capture, waiting for the capture to end.
  size_t deferred_frees();
  // The pool a block came from ({0, 0}: the general pool); the pool of the segment at `segment_address`.
  static MempoolId pool_id(const Block* block);
  MempoolId segment_pool_id(uintptr_t segment_address);

  // The size a request is rounded to, and the segment size a new segment for it gets.
  size_t round_size(size_t nbytes) const;
  static size_t segment_size_for(size_t rounded);

 private:
  using Lock = std::lock_guard<std::mutex>;
  Block* malloc_uncached(size_t nbytes, void* stream);
  Block* find_allocated_locked(uintptr_t addr);
  void add_stream_use(Block* block, void* stream);
  Block* get_free_block(Pool& pool, size_t size, void* stream);
  Block* alloc_segment(Pool& pool, size_t alloc_size, void* stream, bool is_retry);
  Block* take_block(Block* block, Pool& pool, size_t size, size_t requested);
  bool should_split(const Block* block, size_t size) const;
  void free_block(Block* block);
  PrivatePool* pool_for_capture(void* stream);
  void insert_deferred_events();
  size_t try_merge(Block* dst, Block* src, Pool& pool);
  void insert_events(Block* block);
  void process_events();
  void synchronize_and_free_events();
  bool release_available_cached_blocks(Pool& pool, size_t size, void* stream);
  void release_cached_blocks();
  void release_whole_blocks(Pool& pool);
  void release_freeable_pools_locked();
  void release_segment(Block* block);
  void garbage_collect();
  size_t total_memory();
  [[noreturn]] void raise_oom(size_t alloc_size);
  Block* new_block();
  void recycle(Block* block);
  void update(StatArray& stat, const Pool& pool, int64_t delta);

  const int device_;
  std::unique_ptr<AllocBackend> backend_;
  const AllocConf conf_;
  std::mutex mu_;
  std::unique_ptr<Pool> small_, large_;
  std::map<uintptr_t, Segment*> segments_;  // by address: lookups of interior pointers, snapshots
  struct StreamEvents {
    void* stream;
    std::deque<std::pair<void*, Block*>> events;  // in record order
  };
  std::vector<StreamEvents> events_;
  size_t pending_events_ = 0;
  std::vector<Block*> spare_blocks_;
  std::map<MempoolId, std::unique_ptr<PrivatePool>> private_pools_;
  std::vector<std::pair<MempoolId, StreamFilter>> captures_underway_;
  std::vector<Block*> deferred_;  // freed during a capture, awaiting its end (Note [Graph private pools])
  DeviceStats stats_;
  size_t reserved_ = 0;        // sum of segment sizes
  size_t total_memory_ = 0;    // device capacity, queried once when needed
  bool fraction_set_ = false;
  size_t allowed_max_ = 0;     // fraction * total
};

}  // namespace tessera::alloc
